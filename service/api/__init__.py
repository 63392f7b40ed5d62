"""The service's face: the ASGI app (``app``) with GraphQL (``graphql``), the REST mirror
(``rest``), GraphiQL's page (``graphiql``, ``static``), the web pages for people (``pages``), the
files pages load (``assets``) and the HTTP server's limits on slow clients (``http_limits``).
Each request becomes one call of the domain."""
