"""What a user runs besides training: doctor, lint, bench, report, export, eval/predict, demo."""
