# break and continue act on the innermost loop only.
def pairs(n: int) -> int:
    count = 0
    for i in range(n):
        for j in range(n):
            if j > i:
                break
            if j == 1:
                continue
            count += 1
        if i == 3:
            continue
        count += 100
    return count

def find(target: int) -> int:
    i = 0
    found = -1
    while i < 10:
        j = 0
        while j < 10:
            if i * j == target:
                found = i * 10 + j
                break
            j += 1
        if found >= 0:
            break
        i += 1
    return found

# call: pairs(5) -> 411
# call: find(12) -> 26
# call: find(97) -> -1
