"""The calling side: every kind of call, the trio driver's invoker, and the call
bookkeeping both drivers share."""
