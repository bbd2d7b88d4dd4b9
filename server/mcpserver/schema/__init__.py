"""JSON Schema for tools, resources and prompts: read from a function's signature and docstring, checked at
start-up, and enforced on every call's arguments, in time linear in the input.

  _signature  a function's parameters and docstring, without `inspect` (start-up: it brings ast, dis, tokenize)
  _derive     the input schema a signature gives: types, defaults, descriptions, the Context parameter
  _validate   the validator: every keyword it enforces, a schema using one it cannot refused at start-up
The registry (_tools, _resources, _prompts) is this wing's only user.
"""
