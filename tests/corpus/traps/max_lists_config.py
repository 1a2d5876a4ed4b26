# config: max_lists=4
def lists(n: int) -> int:
    total = 0
    for i in range(n):
        total += len([i, i])
    return total

# call: lists(3) -> 6
# call: lists(5) -> trap out_of_memory
