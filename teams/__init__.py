"""The bottom layer every feature stands on: the errors an action raises and
how the API answers them, the API's parser, pagination and schema. Teams,
memberships and the access rules move here from gpu_requests next (issue 19)."""
