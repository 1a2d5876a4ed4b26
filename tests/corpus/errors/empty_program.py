# Only comments: no function at all.
# error: 2:42 program defines no function
