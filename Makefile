# The two commands of the README: `make book` and `make test`, and the inner loop `make check`. Each creates
# .venv and installs the pinned environment when needed (again whenever requirements.txt or pyproject.toml
# changes).
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
MODE   ?= default
JOBS   ?= 2

LINTED := lib tools tests bench

.PHONY: install vendor book check test bench sync students student-site handouts problem-sets slides paper-experiment clean

$(STAMP): requirements.txt pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q -r requirements.txt
	touch $(STAMP)

install: $(STAMP)

## Fetch the pinned MathJax files into book/_vendor (build_book.py does it when needed).
vendor: $(STAMP)
	$(PY) tools/fetch_vendor.py

## Execute every chapter with papermill (MODE=fast|default|paper) and build the site with -W.
book: $(STAMP)
	$(PY) tools/build_book.py --mode $(MODE) -j $(JOBS)
	@echo "Site: $(CURDIR)/_build/stage/_build/html/index.html"

## The inner loop, under a minute on two cores: ruff (format check and lint) over lib/, tools/, tests/ and
## bench/, then the library's unit and property tests (the tests marked `unit` and not `slow`: no book
## build, no browser, no notebook). Run it before every commit, and before `make test`.
check: $(STAMP)
	$(VENV)/bin/ruff format --check $(LINTED)
	$(VENV)/bin/ruff check --no-fix $(LINTED)
	OMP_NUM_THREADS=1 $(PY) -m pytest -m "unit and not slow" -q -p no:cacheprovider

## The gate: unit and property tests, notebook checks, every chapter executed in fast mode (with every exercise
## self-check tried on its solution and on a wrong answer) and in default mode (the published site, built
## with -W), the browser checks of that site (tests/test_site.py: explorers move, dark mode, print), every
## student notebook in a fresh Colab-like venv (tests/test_colab.py). About 30 minutes on 2 cores.
test: $(STAMP)
	$(PY) -m pytest

## Benchmarks: one line per figure, with its goal.
bench: $(STAMP)
	$(PY) bench/run.py

## Re-pair every chapter's .ipynb after editing its .md (keeps cell ids stable).
sync: $(STAMP)
	for f in book/[0-9]*.md book/labs/[0-9]*.md book/quizzes.md book/performance.md; do $(VENV)/bin/jupytext --sync "$$f" || exit 1; done

## Student copies of the lessons (solutions removed) and of their labs, converted for plain notebook front
## ends as Colab's (tools/colab_notebooks.py): _build/student-notebooks/ (a softlin wheel beside the
## lessons and one in labs/, which their setup cells install without GitHub) and a zip of it.
## Their links go to the student edition the Pages workflow publishes under the book's site (student/);
## STUDENT_SITE=https://... (where you host `make student-site` yourself): the copies link there instead.
students: $(STAMP)
	$(PY) tools/student_notebooks.py $(if $(STUDENT_SITE),--site $(STUDENT_SITE))

## The student edition of the site: the built book without the pages for instructors (the plan, the run
## sheets, the grading reference, the kit's rebuild), decks included: _build/student-site/_build/html/
## (tools/student_site.py; from the stage `make book` built, no chapter runs again).
student-site: $(STAMP)
	test -f _build/stage/_build/html/index.html || $(MAKE) book
	$(PY) tools/student_site.py

## One PDF for the chain of results, per lesson and per lab from the built site (headless Chromium, the
## site's print style): _build/handouts/syllabus.pdf, chain_of_results.pdf, NN_name.pdf and labs/NN_name.pdf; and per
## lesson a reading handout without the code cells' input (outputs, figures, explorers kept), for reading
## before a session: _build/handouts/reading/NN_name.pdf.
handouts: $(STAMP)
	test -f _build/stage/_build/html/index.html || $(MAKE) book
	$(PY) tools/handouts.py

## The graded problem sets, one per session (otter-grader; tools/problem_sets.py): student versions, the
## autograders (public and hidden tests) and the rubrics in _build/problem-sets/. Grade a submission with
## `.venv/bin/python tools/problem_sets.py --grade ps1_measures FILE.ipynb` (no Docker).
## `make problem-sets VARIANT=SEED` builds every set with other numbers, drawn from the integer SEED (the
## question text, the solution, the public and the hidden tests agree), into
## _build/problem-sets-variant-SEED/; grade against it with `--variant SEED --grade ...`. Without VARIANT
## the sets are built with the sources' own numbers.
VARIANT ?=
problem-sets: $(STAMP)
	$(PY) tools/problem_sets.py $(if $(VARIANT),--variant $(VARIANT))

## The lessons' slide decks again, from the built site's executed lessons (`make book` builds them too):
## _build/stage/_build/html/slides/NN_name.html (tools/slides.py).
slides: $(STAMP)
	test -f _build/stage/_build/html/index.html || $(MAKE) book
	$(PY) tools/slides.py

## The paper's experiment of chapter 5 at its own scale (300 000 SGD steps per prompt length, 8 starts),
## resumable from checkpoints every 1 000 steps: `make paper-experiment L=200` runs one length (or several:
## L="10 20 30"; all 19 when L is not given) in book/data/paper_runs/intended (RELEASED=1: the authors'
## generator and separate starts, in book/data/paper_runs/released), resuming from a committed checkpoint,
## then merges every complete result into book/data/paper_experiment.json. DEVICE=cuda runs it on a GPU.
L        ?=
DEVICE   ?= cpu
RELEASED ?=
paper-experiment: $(STAMP)
	$(PY) tools/paper_experiment.py $(foreach l,$(L),--L $(l)) --device $(DEVICE) $(if $(RELEASED),--released --different-starts)
	$(PY) tools/paper_experiment.py --merge

clean:
	rm -rf _build .pytest_cache .hypothesis
