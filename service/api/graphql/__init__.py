"""The GraphQL layer: types, the schema, and the error mapping. Resolvers translate one
request into one call of the domain services."""
