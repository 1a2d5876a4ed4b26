def g() -> int:
    secret = 3
    return secret

def f() -> int:
    return secret
# error: 6:12 undefined name
