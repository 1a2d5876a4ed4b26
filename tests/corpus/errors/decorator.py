@staticmethod
def f() -> int:
    return 0
# error: 1:1 this operator is not supported
