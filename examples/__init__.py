"""Runnable examples: the demo service (`feature_store`) and the demo Spark job (`demo`)."""
