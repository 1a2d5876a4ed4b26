# Each operand of a chain is evaluated once, and a false link stops the chain.
def note(log: list[int], v: int) -> int:
    log.append(v)
    return v

def middle_once() -> list[int]:
    log = []
    ok = 0 < note(log, 5) < 10
    log.append(1 if ok else 0)
    return log

def stops_early() -> list[int]:
    log = []
    ok = note(log, 3) < note(log, 2) < note(log, 1)
    log.append(1 if ok else 0)
    return log

def all_links() -> list[int]:
    log = []
    ok = note(log, 1) <= note(log, 2) <= note(log, 3) <= note(log, 4)
    log.append(1 if ok else 0)
    return log

def count_calls(n: int) -> int:
    log = []
    for i in range(n):
        if note(log, i) < note(log, 2) == note(log, 2):
            pass
    return len(log)

# call: middle_once() -> [5, 1]
# call: stops_early() -> [3, 2, 0]
# call: all_links() -> [1, 2, 3, 4, 1]
# call: count_calls(5) -> 12
