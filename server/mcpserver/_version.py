__version__ = "0.2.0"  # this package's version, which serverInfo carries unless a Server gives its own
