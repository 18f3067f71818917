"""The bottom layer every feature stands on: teams and their members
(models.py), the errors an action raises and how the API answers them, the
API's parser, pagination and schema, who may do what (access.py) and which
namespace is a team's (namespaces.py)."""
