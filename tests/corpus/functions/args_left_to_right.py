def note(log: list[int], v: int) -> int:
    log.append(v)
    return v

def three(a: int, b: int, c: int) -> int:
    return a * 100 + b * 10 + c

def order() -> list[int]:
    log = []
    r = three(note(log, 1), note(log, 2), note(log, 3))
    log.append(r)
    return log

def nested() -> list[int]:
    log = []
    three(note(log, 1), three(note(log, 2), note(log, 3), note(log, 4)), note(log, 5))
    return log

def operands() -> list[int]:
    log = []
    x = note(log, 1) - note(log, 2) * note(log, 3)
    log.append(x)
    return log

# call: order() -> [1, 2, 3, 123]
# call: nested() -> [1, 2, 3, 4, 5]
# call: operands() -> [1, 2, 3, -5]
