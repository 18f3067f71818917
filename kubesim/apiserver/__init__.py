"""The API server: HTTP front end, storage and registry, admission's semantics,
validation, patching, listing, tables, authentication and RBAC."""
