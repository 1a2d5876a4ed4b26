# Only comments: no function at all.
# error: 3:1 program defines no function
