"""The public faces over the core: the trio-native client and server, and the blocking twins."""
