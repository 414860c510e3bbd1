"""The web layer: FastAPI app factory, routers, schemas and the mapping of domain errors to
HTTP. Nothing outside this package imports it."""
