"""The receiving side: routing requests to processors, running them, their pools, held
requests, channel handles."""
