"""The bottom layer every feature stands on: the errors an action raises and
how the API answers them, the API's parser, pagination and schema, who may do
what (access.py) and which namespace is a team's (namespaces.py). Teams and
memberships move here from gpu_requests next (issue 19)."""
