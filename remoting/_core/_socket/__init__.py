"""One socket on the trio driver (reading, sending, raw I/O), and the per-connection
bookkeeping both drivers share."""
