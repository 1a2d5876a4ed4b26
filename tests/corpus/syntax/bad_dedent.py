def f(x: int) -> int:
    if x:
        return 1
  return 0
# error: 4:3 unindent does not match
