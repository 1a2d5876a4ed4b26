def f(x: int) -> int:
    if x:
        return 1
  return 0
# error: 4:11 unindent does not match
