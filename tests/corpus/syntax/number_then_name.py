# A number runs into a name that is not a keyword: CPython's "invalid decimal literal", at the
# number (`1andy` is no `1 and y`).
def f(x: int) -> int:
    return 1andy
# error: 4:12 invalid number literal
