"""The transport core: connections, dispatch, the response table and the invoker (trio)."""
