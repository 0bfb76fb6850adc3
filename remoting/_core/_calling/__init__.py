"""A call, whichever driver runs it: `Caller` (every kind of call, for every face) and
`ResponseFuture`."""
