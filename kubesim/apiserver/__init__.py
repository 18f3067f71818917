"""The API server: the HTTP front end and its handlers (one per verb), storage and
registry, admission, validation, patching, listing, tables, authentication and RBAC."""
