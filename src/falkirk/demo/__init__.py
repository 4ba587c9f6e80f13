"""The clickstream demo: the Flux paper's query on Falkirk."""
