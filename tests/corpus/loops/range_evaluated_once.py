def note(log: list[int], v: int) -> int:
    log.append(v)
    return v

def shrinking(n: int) -> int:
    count = 0
    for i in range(n):
        n -= 1
        count += 1
    return count * 100 + n

def args_once() -> list[int]:
    log = []
    for i in range(note(log, 0), note(log, 3), note(log, 1)):
        log.append(10 + i)
    return log

def reassign_loop_var() -> list[int]:
    out = []
    for i in range(4):
        out.append(i)
        i = i * 10
        out.append(i)
    return out

# call: shrinking(5) -> 500
# call: args_once() -> [0, 3, 1, 10, 11, 12]
# call: reassign_loop_var() -> [0, 0, 1, 10, 2, 20, 3, 30]
