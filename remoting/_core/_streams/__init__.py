"""Credit-based streams: the frames, the streams an endpoint sends, the streams it receives."""
