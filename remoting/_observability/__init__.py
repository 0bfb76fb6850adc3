"""What an endpoint tells about itself: statistics, latency histograms, the stats processor."""
