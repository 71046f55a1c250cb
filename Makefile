# The two commands a fresh machine needs: `make demo` and `make test`. Each sets up what is
# missing (scripts/setup.sh), configures and builds with CMake + Ninja, then runs.
BUILD_DIR ?= build
BUILD_TYPE ?= RelWithDebInfo
JOBS ?= $(shell nproc)
VENV := $(shell scripts/venv-dir.sh)
# The build's Python package (graph_opt, docs/Python.md) for the Python the targets run.
export PYTHONPATH := $(abspath $(BUILD_DIR))/python$(if $(PYTHONPATH),:$(PYTHONPATH))

.PHONY: test-times all setup configure build test check fuzz-smoke test-compile test-distributed demo check-install wheel check-wheel check-docs check-roundtrip bench bench-compile bench-peak bench-loops bench-halves bench-cost bench-eager bench-executor bench-costdb bench-costdb-unseen bench-distributed bench-planners bench-compare bench-micro fuzz fuzz-configure \
        fuzz-long fuzz-long-configure \
        sanitize sanitize-configure clean

all: build

setup:
	@scripts/setup.sh

# Re-run CMake only when the build tree is missing or points at another environment; in
# the latter case start from an empty cache, since it remembers the old torch's libraries.
configure: setup
	@if [ ! -f $(BUILD_DIR)/build.ninja ] || ! grep -q "GRAPHOPT_PYTHON:FILEPATH=$(VENV)/bin/python" $(BUILD_DIR)/CMakeCache.txt; then \
	  rm -f $(BUILD_DIR)/CMakeCache.txt; \
	  cmake -S . -B $(BUILD_DIR) -G Ninja -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) \
	        -DGRAPHOPT_PYTHON:FILEPATH=$(VENV)/bin/python; \
	fi

build: configure
	@cmake --build $(BUILD_DIR) -j $(JOBS)

test: build
	@cd $(BUILD_DIR) && ctest --output-on-failure -j $(JOBS)

# Everything, in CI (.ci/run): make test, then every check it leaves out (scripts/check.sh):
# the lit tests again without the fork server, the pass fuzzer on 3000 more graphs, the full
# torch.compile set, every two-rank test, the zoo's .pt2 round trip, the pip install, and each
# fuzz harness briefly. A table of each step's time and result at the end; exit 1 if any
# failed. 38.6 minutes after the build on 2 cores, one fresh-clone run (docs/Building.md).
check: build
	@BUILD_DIR=$(BUILD_DIR) JOBS=$(JOBS) MAKE="$(MAKE)" scripts/check.sh

# The fuzz harnesses (fuzz/) in this build with a standalone driver instead of libFuzzer (no
# clang, no sanitizers, no coverage: fuzz/StandaloneFuzzMain.cpp), each run briefly by
# scripts/fuzz.sh from the same seeds as make fuzz. make check runs it; make fuzz is the real
# thing.
fuzz-smoke: build
	@cmake --build $(BUILD_DIR) -j $(JOBS) --target fuzz-smoke
	@FUZZ_BUILD_DIR=$(BUILD_DIR) FUZZ_SECONDS=$(FUZZ_SECONDS) FUZZ_PASS_RUNS=$(or $(FUZZ_PASS_RUNS),1000) \
	  FUZZ_ZOO=$(FUZZ_ZOO) scripts/fuzz.sh $(FUZZ_TARGETS)

# Where the suite's time goes (issue 52): make test's ctest with every runner's per-test times
# kept, then the slowest 30 tests across lit, gtest and pytest, each ctest entry, and the
# suite's wall and CPU time (scripts/test-times.py).
test-times: build
	@scripts/test-times.py --build $(BUILD_DIR) --jobs $(JOBS)

# `pip install --no-build-isolation .` into a fresh venv that has the project's torch (a .pth
# in the new venv names the project venv's site-packages: torch is not downloaded again, and
# --no-index makes sure nothing is), then graph_opt used from outside the checkout
# (python/tests/check_install.py). Not part of make test: pip builds the library again, in
# build/pip (kept, so a second run is incremental).
CHECK_INSTALL_DIR := $(BUILD_DIR)/check-install
check-install: setup
	@rm -rf $(CHECK_INSTALL_DIR) && mkdir -p $(CHECK_INSTALL_DIR)
	@base=$$($(VENV)/bin/python -c 'import sys; print(sys._base_executable)') && \
	  $$base -m venv $(CHECK_INSTALL_DIR)/venv
	@theirs=$$($(VENV)/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])') && \
	  mine=$$($(CHECK_INSTALL_DIR)/venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])') && \
	  echo "$$theirs" > "$$mine/project-venv.pth"
	@$(CHECK_INSTALL_DIR)/venv/bin/pip install -q "scikit-build-core>=0.10"
	@env -u PYTHONPATH $(CHECK_INSTALL_DIR)/venv/bin/pip install --no-build-isolation --no-index .
	@cd $(CHECK_INSTALL_DIR) && env -u PYTHONPATH venv/bin/python $(CURDIR)/python/tests/check_install.py $(CURDIR)/examples/mlp_train_step.gir

# The wheel: dist/graph_opt-<version>-cp311-cp311-manylinux_<glibc>_x86_64.whl, built by pip
# from the project venv (scikit-build-core, in build/pip like check-install) and repaired by
# auditwheel so that it carries every shared library it needs beyond torch's
# (scripts/wheel.sh build, docs/Python.md). check-wheel installs it into a fresh venv that has
# only the project's torch and checks it from outside the checkout (scripts/wheel.sh check).
wheel: setup
	@BUILD_DIR=$(BUILD_DIR) scripts/wheel.sh build

check-wheel: wheel
	@BUILD_DIR=$(BUILD_DIR) scripts/wheel.sh check

# The default model: a ResNet-18 joint training step (full width, batch 4, 64x64 images),
# exported once into the build tree and re-exported only when the exporter or the model zoo
# (tools/zoo) changes.
DEMO_MODEL := $(BUILD_DIR)/demo/resnet18-train.pt2

# The exporter imports graph_opt (python/graph_opt/export.py) from the build: build first.
# Batch 96 at 64x64: the activations (about 150 MiB) outweigh the weights, gradients and
# batch (about 95 MiB), as in the steps people run out of memory with; a step takes about
# 0.9 s on 2 cores. (Exported again when this Makefile changes.)
$(DEMO_MODEL): tools/export/export_model.py $(wildcard tools/zoo/*.py) python/graph_opt/export.py \
               Makefile | build
	@mkdir -p $(dir $@)
	@echo "demo: exporting ResNet-18 (joint training step, batch 96, 64x64) with torch.export, once"
	@$(VENV)/bin/python tools/export/export_model.py --model resnet18 --mode train \
	  --batch 96 --image-size 64 -o $@

# Every shell block of README.md and docs/ run as written, or skipped with its reason
# (scripts/check-docs.py: a <!-- docs-check: run|skip --> marker above each); the README's
# examples read the demo's model, exported here if need be.
check-docs: build $(DEMO_MODEL)
	@$(VENV)/bin/python scripts/check-docs.py --build $(BUILD_DIR)

# Redundant-op elimination to a fixpoint (what it merged, folded and removed: --pass-stats),
# summary, liveness (simulated peak with the operators' scratch memory measured, breakdown,
# largest activations), the profile (per-node medians, activation metrics, report.html),
# checkpointing into half the activations saved for backward (what it recomputed, the
# measured peak and step time before and after: docs/Checkpointing.md), reinplace (the
# results that can reuse a dying operand's storage do: docs/Reinplace.md), three measured
# steps of the result, and the verifier's check that the graph after the pipeline computes
# bitwise what the input did.
DEMO_REPORT := $(BUILD_DIR)/demo/report
# The step's whole peak is about 247 MiB; "fit it in 200 MiB" is checkpoint{peak=200MiB}
# (the least graph-opt's greedy reaches is about 190 MiB).
DEMO_PEAK ?= 200MiB
demo: build $(DEMO_MODEL)
	@$(BUILD_DIR)/bin/graph-opt $(DEMO_MODEL) --summary \
	  '-passes=repeat{cse,canonicalize,dce},liveness{scratch=measured},profile,checkpoint{peak=$(DEMO_PEAK)},reinplace' \
	  --pass-stats \
	  --report-dir $(DEMO_REPORT) --run 3 --verify --bitwise
	@echo "demo: reports in $(DEMO_REPORT)/ (node_stats.csv, activation_stats.csv, profile.json, trace.json, report.html, checkpoint.json)"
	@echo "demo: open $(abspath $(DEMO_REPORT))/report.html"

# The benchmark harness (benchmarks/models/harness.py): every model x pipeline verified
# (bitwise) and then run alternately with its input graph, and every model x peer (eager
# PyTorch and, by default, eager with torch.utils.checkpoint per block; each in its own
# process, verified against eager first), all with $(BENCH_THREADS) threads (empty: the
# cores); results.csv, results.json and one Pareto plot (time ratio against peak-memory ratio)
# per model in $(BENCH_DIR)/, and the results appended to the regression record that
# `make bench-compare` reads (its last two entries: exit 1 on a regression beyond the noise).
# The tiny models come from the zoo (`make test` exports it; the ones missing are exported
# below); a :default model is exported once into $(BENCH_DIR)/exports/.
# torch.compile is not in the default peers: each model and configuration compiles cold, 15 s
# to over a minute on 2 cores, which would bring make bench near 10 minutes
# (docs/Benchmarking.md). With it:
#   make bench BENCH_PEERS=eager,checkpoint,compile,compile-budget=0.5
BENCH_DIR := $(BUILD_DIR)/bench
BENCH_MODELS ?= resnet18:tiny,gpt2:tiny,bert:tiny,resnet18:default
BENCH_PIPELINES ?= repeat{cse,canonicalize,dce};cse;checkpoint{activations=50%};checkpoint{activations=30%}
BENCH_PEERS ?= eager,checkpoint
BENCH_RUNS ?= 5
BENCH_THREADS ?=
# The tiny models the list names, exported here when missing (`make test` exports them all).
BENCH_TINY := $(foreach m,$(shell echo '$(BENCH_MODELS)' | tr ',' '\n' | sed -n 's/:tiny$$//p'),\
                $(BUILD_DIR)/zoo/$(m)-train.pt2)
$(BUILD_DIR)/zoo/%-train.pt2: | build
	@mkdir -p $(dir $@)
	@$(VENV)/bin/python tools/export/export_model.py --model $* --mode train --tiny -o $@
bench: build $(BENCH_TINY)
	@$(VENV)/bin/python benchmarks/models/harness.py run --models '$(BENCH_MODELS)' \
	  --pipelines '$(BENCH_PIPELINES)' --peers '$(BENCH_PEERS)' --runs $(BENCH_RUNS) --bitwise \
	  $(if $(BENCH_THREADS),--threads $(BENCH_THREADS)) \
	  --graph-opt $(BUILD_DIR)/bin/graph-opt --zoo $(BUILD_DIR)/zoo --exports $(BENCH_DIR)/exports \
	  -o $(BENCH_DIR) --record $(BENCH_DIR)/record.jsonl

# graph-opt inside torch.compile (docs/TorchCompile.md): all seven tiny zoo models trained
# 50 AdamW steps eager, under torch.compile, and under torch.compile with graph-opt's
# partitioner, Inductor compiling cold (15-60 s a compile on 2 cores). make test trains the
# MLP and the tiny GPT-2 only.
test-compile: build
	@cd $(BUILD_DIR) && PYTHONPATH=$(abspath $(BUILD_DIR))/python GRAPHOPT_COMPILE_ALL=1 GRAPHOPT_VERIFY=1 \
	  $(VENV)/bin/python -m pytest -q -p no:cacheprovider --durations=0 \
	  $(CURDIR)/python/tests/test_compile.py

# graph-opt's plan against torch's knapsack under the same Inductor (docs/TorchCompile.md):
# torch.compile, compile-budget=B, graph-opt-inductor@B (the same bytes bound) and per-block
# torch.utils.checkpoint under compile, on the default-size models; results, plots and the
# budget-by-budget summary in $(BENCH_DIR)/compile. About half an hour per model on 2 cores
# (GPT-2's eleven configurations and its export took 35 minutes, BERT-base's 34: Inductor
# compiles each configuration twice for a model with dropout, once to verify, dropout off).
# --time-failed: torch.compile itself fails peers.py's float64 check on ResNet-50
# (docs/TorchCompile.md), and its rows would otherwise go untimed.
BENCH_COMPILE_MODELS ?= resnet50:default,bert:default,gpt2:default
BENCH_COMPILE_BUDGETS ?= 0.5 0.3 0.1 0.05
BENCH_COMPILE_PEERS := compile,checkpoint-compile$(foreach b,$(BENCH_COMPILE_BUDGETS),,compile-budget=$(b),graph-opt-inductor@$(b))
bench-compile: build
	@$(VENV)/bin/python benchmarks/models/harness.py run --models '$(BENCH_COMPILE_MODELS)' \
	  --pipelines none --peers '$(BENCH_COMPILE_PEERS)' --runs $(BENCH_RUNS) --time-failed \
	  $(if $(BENCH_THREADS),--threads $(BENCH_THREADS)) \
	  --graph-opt $(BUILD_DIR)/bin/graph-opt --zoo $(BUILD_DIR)/zoo --exports $(BENCH_DIR)/exports \
	  -o $(BENCH_DIR)/compile

# peak= under torch.compile against torch's knapsack at equal measured peak
# (benchmarks/models/peak_bound.py, docs/TorchCompile.md "peak= against the knapsack"): per
# model, the knapsack at each budget, graph-opt at peak= the knapsack's measured peak (timed
# interleaved with it, the time ratio with a 95% bootstrap interval), graph-opt at bounds
# BENCH_PEAK_EXTRA of the way from the inputs to the unbudgeted peak, per-block checkpointing;
# checks that every graph-opt peak is within its bound and monotone; tables, JSON and Pareto
# plots in $(BENCH_DIR)/peak. About 20 minutes per default-size model on 2 cores.
# BENCH_PEAK_PIPELINE replaces graph-opt's pipeline (e.g. one with checkpoint{cost=inductor}).
# BENCH_PEAK_MODELS may name models outside the zoo, built from configs
# (benchmarks/models/unseen_models.py: hf-causal-lm, hf-distilbert, hf-bart, hf-vit,
# mobilenet_v2, deep-mlp), e.g. BENCH_PEAK_MODELS=hf-causal-lm:default,deep-mlp:default.
comma := ,
empty :=
space := $(empty) $(empty)
BENCH_PEAK_MODELS ?= gpt2:default,bert:default,resnet50:default,llama:default,t5:default
BENCH_PEAK_EXTRA ?= 0.9,0.75
bench-peak: build
	@$(VENV)/bin/python benchmarks/models/peak_bound.py --models '$(BENCH_PEAK_MODELS)' \
	  --budgets '$(subst $(space),$(comma),$(BENCH_COMPILE_BUDGETS))' --extra '$(BENCH_PEAK_EXTRA)' \
	  --steps $(if $(BENCH_STEPS),$(BENCH_STEPS),10) $(if $(BENCH_THREADS),--threads $(BENCH_THREADS)) \
	  $(if $(BENCH_PEAK_PIPELINE),--pipeline '$(BENCH_PEAK_PIPELINE)') -o $(BENCH_DIR)/peak

# Coverage of the training loops users write through graph-opt's partitioner
# (benchmarks/models/loops.py, docs/TorchCompile.md "Every loop reaches the planner"): per model
# and loop (fixed shape, varying length, bf16 autocast, gradient accumulation, dropout, a model
# that checkpoints itself, DDP and FSDP2 on 2 gloo ranks), graphs planned, fallbacks with their
# reasons, losses against plain torch.compile. Table and JSON in $(BENCH_DIR)/loops.
BENCH_LOOPS_MODELS ?= bert:tiny,gpt2:tiny,llama:tiny,t5:tiny,resnet50:tiny
BENCH_LOOPS ?= fixed,varying,bf16,accumulate,dropout,checkpointed,ddp,fsdp2
bench-loops: build
	@$(VENV)/bin/python benchmarks/models/loops.py --models '$(BENCH_LOOPS_MODELS)' \
	  --loops '$(BENCH_LOOPS)' --steps $(if $(BENCH_STEPS),$(BENCH_STEPS),3) \
	  $(if $(BENCH_LOOPS_INNER),--inner $(BENCH_LOOPS_INNER)) \
	  $(if $(BENCH_LOOPS_PEAK_SHARE),--peak-share $(BENCH_LOOPS_PEAK_SHARE)) \
	  $(if $(BENCH_THREADS),--threads $(BENCH_THREADS)) -o $(BENCH_DIR)/loops

# halves.py's peak prediction against the measured peak of the step torch.compile runs, per
# model and knapsack budget (benchmarks/models/halves_accuracy.py; docs/TorchCompile.md "The
# peak of the halves"): the zoo's models at the default size and those outside it.
BENCH_HALVES_MODELS ?= hf-causal-lm:default,hf-distilbert:default,hf-bart:default,mobilenet_v2:default,deep-mlp:default,hf-vit:default,gpt2:default,bert:default,llama:default,t5:default,resnet50:default
BENCH_HALVES_BUDGETS ?= 1.0,0.3
bench-halves: build
	@$(VENV)/bin/python benchmarks/models/halves_accuracy.py --models '$(BENCH_HALVES_MODELS)' \
	  --budgets '$(BENCH_HALVES_BUDGETS)' --activations '' $(if $(BENCH_THREADS),--threads $(BENCH_THREADS))

# checkpoint's cost models under peak= inside torch.compile (benchmarks/models/cost_ab.py,
# docs/TorchCompile.md "Which cost model plans inside torch.compile"): per model, at bounds
# BENCH_COST_FRACTIONS of the way from the inputs to plain compile's peak, cost=flops and
# cost=inductor plans side by side: measured peaks, interleaved step-time ratio with its interval.
BENCH_COST_MODELS ?= gpt2:default,bert:default,llama:default,t5:default,resnet50:default
BENCH_COST_FRACTIONS ?= 0.9,0.7
bench-cost: build
	@$(VENV)/bin/python benchmarks/models/cost_ab.py --models '$(BENCH_COST_MODELS)' \
	  --fractions '$(BENCH_COST_FRACTIONS)' --steps $(if $(BENCH_STEPS),$(BENCH_STEPS),10) \
	  $(if $(BENCH_THREADS),--threads $(BENCH_THREADS)) -o $(BENCH_DIR)/cost

# graph_opt.auto_checkpoint in eager PyTorch on the zoo's models (benchmarks/models/eager_peak.py,
# docs/Checkpointing.md "peak= in eager PyTorch"): per model, bounds BENCH_EAGER_SHARES of the
# way from the inputs to the plain step's measured peak; the planned step's measured peak
# against each, its losses against the plain model's (bitwise), the step time ratio over
# interleaved pairs with its bootstrap interval; then per-block checkpointing (Hugging Face's
# gradient_checkpointing_enable() where the model has it, torch.utils.checkpoint per block
# otherwise) and graph-opt at its measured peak, timed against it. Tables, JSON and a plot
# (eager_peak.png) in $(BENCH_DIR)/eager. BENCH_EAGER_MODELS may name the models outside the
# zoo (hf-causal-lm, hf-distilbert, hf-bart, hf-vit, mobilenet_v2, deep-mlp).
BENCH_EAGER_MODELS ?= resnet50:default,bert:default,gpt2:default,llama:default,t5:default
BENCH_EAGER_SHARES ?= 0.9,0.75,0.6
bench-eager: build
	@$(VENV)/bin/python benchmarks/models/eager_peak.py \
	  --models '$(BENCH_EAGER_MODELS)' --shares '$(BENCH_EAGER_SHARES)' \
	  $(if $(BENCH_THREADS),--threads $(BENCH_THREADS)) -o $(BENCH_DIR)/eager

# graph-opt's executor against eager PyTorch on the same training step, interleaved
# (benchmarks/models/executor_eager.py, docs/Runtime.md).
BENCH_EXECUTOR_MODELS ?= hf-vit,hf-roberta,mobilenet_v2,hf-causal-lm,hf-distilbert
BENCH_EXECUTOR_PAIRS ?= 15
bench-executor: build
	@mkdir -p $(BENCH_DIR)
	@$(VENV)/bin/python benchmarks/models/executor_eager.py \
	  --models '$(BENCH_EXECUTOR_MODELS)' --pairs $(BENCH_EXECUTOR_PAIRS) \
	  $(if $(BENCH_THREADS),--threads $(BENCH_THREADS)) --exports $(BENCH_DIR)/exports-executor \
	  -o $(BENCH_DIR)/executor-eager.json

# checkpoint's planners side by side on graph-opt's executor (benchmarks/models/planners.py,
# docs/Checkpointing.md): torch.compile's own partitioner (planner=torch) and the default greedy
# at each share of the activations, the structured planner, planner=milp (with its proven gap),
# and the greedy at the bytes torch's plan saves, beside
# eager and per-block torch.utils.checkpoint; saved share, backward start, peak, step time and
# planning time per row. The three default-size models take most of an hour on 2 cores.
BENCH_PLANNER_MODELS ?= resnet50:default,bert:default,gpt2:default,llama:tiny,t5:tiny
BENCH_PLANNER_BUDGETS ?= 50,30,10,5
BENCH_PLANNERS ?= torch,greedy,greedy@torch,structured,milp
bench-planners: build
	@$(VENV)/bin/python benchmarks/models/planners.py --models '$(BENCH_PLANNER_MODELS)' \
	  --budgets '$(BENCH_PLANNER_BUDGETS)' --planners '$(BENCH_PLANNERS)' --runs $(BENCH_RUNS) \
	  $(if $(BENCH_THREADS),--threads $(BENCH_THREADS)) \
	  --graph-opt $(BUILD_DIR)/bin/graph-opt --zoo $(BUILD_DIR)/zoo --exports $(BENCH_DIR)/exports \
	  -o $(BENCH_DIR)/planners

# Every distributed test on two gloo ranks (python/tests/test_distributed.py), the longer ones
# make test leaves out included: data-parallel on half a batch per rank against the
# single-process full batch (two exports), a peer that hangs (a collective timeout), and
# shard-parameters on tied weights (an export).
test-distributed: build
	@cd $(BUILD_DIR) && PYTHONPATH=$(abspath $(BUILD_DIR))/python GRAPHOPT_DISTRIBUTED_ALL=1 \
	  GRAPHOPT_ZOO_DIR=$(abspath $(BUILD_DIR))/zoo \
	  $(VENV)/bin/python -m pytest -q -p no:cacheprovider $(CURDIR)/python/tests/test_distributed.py

# graph-opt's data-parallel pass against DistributedDataParallel, and shard-parameters against
# FSDP2's fully_shard, on gloo ranks of this machine (benchmarks/distributed/data_parallel.py and
# sharded.py, docs/Distributed.md): step time, exposed communication and peak memory per rank,
# the tiny MLP, GPT-2 and ResNet-18 without dropout.
BENCH_DP_MODELS ?= mlp,gpt2,resnet18
BENCH_DP_RANKS ?= 2
bench-distributed: build
	@$(VENV)/bin/python benchmarks/distributed/data_parallel.py --models '$(BENCH_DP_MODELS)' \
	  --ranks $(BENCH_DP_RANKS) --runs $(BENCH_RUNS) $(if $(BENCH_THREADS),--threads $(BENCH_THREADS)) \
	  -o $(BENCH_DIR)/distributed
	@$(VENV)/bin/python benchmarks/distributed/sharded.py --models '$(BENCH_DP_MODELS)' \
	  --ranks $(BENCH_DP_RANKS) --runs $(BENCH_RUNS) $(if $(BENCH_THREADS),--threads $(BENCH_THREADS)) \
	  -o $(BENCH_DIR)/distributed

# The operator cost database's goal (docs/CostDB.md): the bundled sweeps and every model's
# training graph measured into one database, then each model's step predicted leave-one-model-out
# (BENCH_COSTDB_LEAVE_OUT=family: without every graph of its family, e.g. every ResNet) against
# its measured step; a table, CSV/JSON and a plot in build/bench/costdb. About 5 minutes
# on 2 cores when the default-size exports exist (each missing one is exported first); run it on an
# idle machine, since what it measures is time.
BENCH_COSTDB_DEFAULT_MODELS ?= resnet50,bert,gpt2
BENCH_COSTDB_LEAVE_OUT ?= model
# BENCH_COSTDB_ARGS: more of attribution.py's options, e.g. --in-step --neighbours.
bench-costdb: build
	@$(VENV)/bin/python benchmarks/costdb/attribution.py --costdb $(BUILD_DIR)/bin/graph-opt-costdb \
	  --zoo $(BUILD_DIR)/zoo --exports $(BENCH_DIR)/exports --leave-out $(BENCH_COSTDB_LEAVE_OUT) \
	  $(BENCH_COSTDB_ARGS) \
	  --default-models '$(BENCH_COSTDB_DEFAULT_MODELS)' -o $(BENCH_DIR)/costdb$(if $(filter family,$(BENCH_COSTDB_LEAVE_OUT)),-family)

# The cost database on five models it never saw (benchmarks/costdb/unseen.py: a MobileNetV2, an
# EfficientNet-B0, a ViT-B/16, a DistilBERT-style encoder, an LSTM language model, random weights),
# each predicted from the database bench-costdb built (run that first, with the options to
# compare, e.g. BENCH_COSTDB_ARGS='--in-step --neighbours'). Idle machine: it measures time.
bench-costdb-unseen: build
	@$(VENV)/bin/python benchmarks/costdb/unseen.py --costdb $(BUILD_DIR)/bin/graph-opt-costdb \
	  --db $(BENCH_DIR)/costdb/costs.sqlite -o $(BENCH_DIR)/costdb-unseen

# Round trips on every graph of the zoo (python/tools/roundtrip_zoo.py): fx -> IR -> fx -> IR
# and, after each pipeline, the .pt2 writer through torch.export.load, outputs compared bit
# for bit. A few minutes; make test checks one graph of each kind.
check-roundtrip: build
	@test -d $(BUILD_DIR)/zoo || { echo "$(BUILD_DIR)/zoo: run make test first (it exports the zoo)"; exit 2; }
	@GRAPHOPT_ZOO_DIR=$(BUILD_DIR)/zoo $(VENV)/bin/python python/tools/roundtrip_zoo.py

# The micro-benchmarks (benchmarks/micro.py): IRBenchmarks, PassBenchmarks (up to 100k
# nodes) and ExecutorBenchmarks (executor overhead), 9 repetitions each, their JSON kept in
# $(BENCH_DIR)/micro/ per commit and run (runs.jsonl lists the runs).
bench-micro: build
	@$(VENV)/bin/python benchmarks/micro.py run --build-dir $(BUILD_DIR) --dir $(BENCH_DIR)/micro

# The last two entries of the harness's record (exit 1 on a regression), then, when there
# are two micro-benchmark runs, Google Benchmark's compare.py on them (Debian's
# libbenchmark-tools; what got slower beyond its U test's noise is listed). The exit code is
# the harness's alone.
bench-compare:
	@status=0; \
	$(VENV)/bin/python benchmarks/models/harness.py compare --record $(BENCH_DIR)/record.jsonl || status=$$?; \
	echo; \
	$(VENV)/bin/python benchmarks/micro.py compare --dir $(BENCH_DIR)/micro || true; \
	exit $$status

# The libFuzzer targets (fuzz/, docs/Robustness.md): a separate build tree made with clang-14,
# the libraries instrumented for libFuzzer, ASan and UBSan (GRAPHOPT_FUZZ=ON builds nothing
# else), then each target run for FUZZ_SECONDS from seeds made out of the lit tests' .gir texts
# and the zoo's smallest .pt2 archives, and the pass fuzzer (fuzz-passes) for FUZZ_PASS_RUNS
# graphs, 50k by default, about an hour with FUZZ_PASS_JOBS=2 (scripts/fuzz.sh, which lists its other variables).
# Exit 1 when a target crashes; what crashed is in $(FUZZ_BUILD_DIR)/artifacts/<target>/.
FUZZ_BUILD_DIR ?= build-fuzz
FUZZ_SECONDS ?= 180
FUZZ_TARGETS ?=
FUZZ_ZOO ?= $(BUILD_DIR)/zoo
fuzz-configure: setup
	@if [ ! -f $(FUZZ_BUILD_DIR)/build.ninja ] || ! grep -q "GRAPHOPT_PYTHON:FILEPATH=$(VENV)/bin/python" $(FUZZ_BUILD_DIR)/CMakeCache.txt; then \
	  rm -f $(FUZZ_BUILD_DIR)/CMakeCache.txt; \
	  CC=clang-14 CXX=clang++-14 cmake -S . -B $(FUZZ_BUILD_DIR) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	        -DGRAPHOPT_FUZZ=ON -DGRAPHOPT_PYTHON:FILEPATH=$(VENV)/bin/python; \
	fi

fuzz: fuzz-configure
	@cmake --build $(FUZZ_BUILD_DIR) -j $(JOBS) --target fuzzers
	@FUZZ_BUILD_DIR=$(FUZZ_BUILD_DIR) FUZZ_SECONDS=$(FUZZ_SECONDS) FUZZ_ZOO=$(FUZZ_ZOO) \
	  scripts/fuzz.sh $(FUZZ_TARGETS)

# The pass fuzzer for the long haul (not CI; docs/Robustness.md): fuzz-passes built with
# coverage and no sanitizers at -O2 in $(FUZZ_LONG_BUILD_DIR), in libFuzzer's fork mode with two
# processes, until FUZZ_LONG_RUNS graphs (default 1M: hours on 2 cores). Its corpus persists in
# the build tree, so interrupted runs add up.
FUZZ_LONG_BUILD_DIR ?= build-fuzz-release
FUZZ_LONG_RUNS ?= 1000000
fuzz-long-configure: setup
	@if [ ! -f $(FUZZ_LONG_BUILD_DIR)/build.ninja ] || ! grep -q "GRAPHOPT_PYTHON:FILEPATH=$(VENV)/bin/python" $(FUZZ_LONG_BUILD_DIR)/CMakeCache.txt; then \
	  rm -f $(FUZZ_LONG_BUILD_DIR)/CMakeCache.txt; \
	  CC=clang-14 CXX=clang++-14 cmake -S . -B $(FUZZ_LONG_BUILD_DIR) -G Ninja -DCMAKE_BUILD_TYPE=Release \
	        -DGRAPHOPT_FUZZ=ON -DGRAPHOPT_SANITIZERS= -DGRAPHOPT_FUZZ_OPT_FLAGS="-O2 -g1 -DNDEBUG" \
	        -DGRAPHOPT_PYTHON:FILEPATH=$(VENV)/bin/python; \
	fi

fuzz-long: fuzz-long-configure
	@cmake --build $(FUZZ_LONG_BUILD_DIR) -j $(JOBS) --target fuzz-passes
	@FUZZ_BUILD_DIR=$(FUZZ_LONG_BUILD_DIR) FUZZ_PASS_RUNS=$(FUZZ_LONG_RUNS) FUZZ_PASS_JOBS=2 \
	  scripts/fuzz.sh fuzz-passes

# The sanitizer build (docs/Robustness.md): everything compiled with ASan and UBSan
# (GRAPHOPT_SANITIZE=ON, cmake/Sanitize.cmake) in $(SANITIZE_BUILD_DIR), then every test run
# there as `make test` runs them, with the test timeouts scaled by 4, sharing the zoo of
# $(BUILD_DIR) (exported there when missing). Exit 1 when a test fails or a sanitizer reports.
# LeakSanitizer is off (LibTorch keeps process-lifetime caches it would report), the shadow
# gap is not protected (CUDA's libraries, loaded by LibTorch, map memory there), and an
# allocation too large returns null as malloc does (the tests check that graph-opt reports
# it; ASan would abort instead).
# ProfileTiming is left out: it checks measured times, which the sanitizers change.
SANITIZE_BUILD_DIR ?= build-sanitize
SANITIZE_ENV := ASAN_OPTIONS=detect_leaks=0:protect_shadow_gap=0:allocator_may_return_null=1:abort_on_error=1 \
                UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
sanitize-configure: setup
	@if [ ! -f $(SANITIZE_BUILD_DIR)/build.ninja ] || ! grep -q "GRAPHOPT_PYTHON:FILEPATH=$(VENV)/bin/python" $(SANITIZE_BUILD_DIR)/CMakeCache.txt; then \
	  rm -f $(SANITIZE_BUILD_DIR)/CMakeCache.txt; \
	  cmake -S . -B $(SANITIZE_BUILD_DIR) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	        -DGRAPHOPT_SANITIZE=ON -DGRAPHOPT_PYTHON:FILEPATH=$(VENV)/bin/python \
	        -DGRAPHOPT_ZOO_DIR:PATH=$(abspath $(BUILD_DIR))/zoo; \
	fi

sanitize: sanitize-configure
	@cmake --build $(SANITIZE_BUILD_DIR) -j $(JOBS)
	@cd $(SANITIZE_BUILD_DIR) && $(SANITIZE_ENV) ctest --output-on-failure -j $(JOBS) -E '^ProfileTiming$$'

clean:
	rm -rf $(BUILD_DIR)
