"""Protocol adapters: other ways into Waystation beside the REST routes, each calling the
service layer (api/services) and never a route."""
