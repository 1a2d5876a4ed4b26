def note(log: list[int], v: int) -> int:
    log.append(v)
    return v

def and_skips() -> list[int]:
    log = []
    r = note(log, 0) and note(log, 1)
    log.append(r + 10)
    return log

def and_runs() -> list[int]:
    log = []
    r = note(log, 2) and note(log, 3)
    log.append(r + 10)
    return log

def or_skips() -> list[int]:
    log = []
    r = note(log, 4) or note(log, 5)
    log.append(r + 10)
    return log

def or_runs() -> list[int]:
    log = []
    r = note(log, 0) or note(log, 6)
    log.append(r + 10)
    return log

def guard(xs: list[int], i: int) -> bool:
    return i < len(xs) and xs[i] > 0

def guard_or(xs: list[int]) -> bool:
    return len(xs) == 0 or xs[0] == 1

# call: and_skips() -> [0, 10]
# call: and_runs() -> [2, 3, 13]
# call: or_skips() -> [4, 14]
# call: or_runs() -> [0, 6, 16]
# call: guard([1, 2], 5) -> False
# call: guard([1, 2], 1) -> True
# call: guard([1, -2], 1) -> False
# call: guard_or([]) -> True
# call: guard_or([1]) -> True
# call: guard_or([2]) -> False
