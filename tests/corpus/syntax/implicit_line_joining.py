# Inside brackets, newlines and indentation are ignored.
def combine(a: int,
            b: int,
        c: int) -> int:
    return (a +
      b
            * c)

def call() -> int:
    return combine(
        1,
        2,
        3
    ) + max(
  4,
              5)

def cond(x: int) -> bool:
    return (x > 0
            and x < 10
            or x == -1)

# call: combine(1, 2, 3) -> 7
# call: call() -> 12
# call: cond(5) -> True
# call: cond(-1) -> True
# call: cond(10) -> False
