"""The mcpserver portability lab: build images for a matrix of distributions and Pythons, run the suites
in each, check each image, and report. `scripts/run_matrix.py` is the command line (matrix/cli.py);
docs/embedding.md and docs/adr/0001-lab-*.md explain the choices."""
