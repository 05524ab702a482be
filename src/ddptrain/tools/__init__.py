"""What a user runs besides training: doctor, lint, bench, report, export, eval/predict, demo."""

# `make-dataset`'s images a class by default (here, not in demodata.py, so that the command line's help can name it
# without importing numpy): enough that a model from random weights learns the shapes with the default recipe in
# 10 epochs — 0.98 top-1 at 64 px on 2 processes, where 160 a class gave 0.42 and 500 gave 0.76: on few pictures the
# model learns the pictures before the outlines (docs/howto.md, "The default recipe").
PER_CLASS = 1000
