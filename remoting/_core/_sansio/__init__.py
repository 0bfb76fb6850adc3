"""What both drivers run, sans-I/O: no trio, no socket, no thread, no clock of its own (a test
proves importing it loads no trio). The response table, the address list, a connection's
lifecycle and its decoding, the send queue, receive buffers, backoff, the call kinds."""
