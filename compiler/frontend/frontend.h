// The .dstrat front end: the API the rest of dstc calls.
//
//   check_files(paths, defines, sources, diags) -> FrontendResult
//     Loads the files and their imports, elaborates every model, strategy
//     and search space declared in the named files (models with their
//     defaults and -D overrides), and reports every error to `diags`.
//
//   FrontendResult::program      all files' ASTs and the declaration table
//   FrontendResult::models       elaborated models (compiler/frontend/model.h)
//   FrontendResult::strategies   elaborated strategies (strategy.h), each
//                                with its Model, mesh, cluster reference,
//                                run, schedule, pipeline, compute, memory
//                                and tie configs, all with source ranges
//   FrontendResult::searches     search spaces: enumerate_search() visits the
//                                points satisfying `where`, and
//                                elaborate_search_point() elaborates a `try`
//                                at a point, sharing models through the cache
//
//   check_against_cluster(strategy, facts, diags)
//     The checks that need the cluster: the mesh's device count.
//
// Lower-level entry points: parse_file (parser.h), load_program
// (program.h), elaborate_model (elaborate_model.h), elaborate_strategy and
// elaborate_search (elaborate_strategy.h), format_file (formatter.h).
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "compiler/frontend/elaborate_strategy.h"
#include "compiler/frontend/program.h"

namespace dstc::frontend {

struct CheckedModel {
  const ComponentDecl* decl = nullptr;
  const Model* model = nullptr;  // owned by FrontendResult::model_cache
};

struct CheckedStrategy {
  const StrategyDecl* decl = nullptr;
  Strategy strategy;
};

struct FrontendResult {
  std::unique_ptr<Program> program;
  std::vector<ParamOverride> defines;
  ModelCache model_cache;
  std::vector<CheckedModel> models;
  std::vector<CheckedStrategy> strategies;
  std::vector<SearchSpace> searches;
  std::vector<size_t> search_points;  // points satisfying `where`, per search

  const CheckedStrategy* find_strategy(std::string_view name) const;
  const SearchSpace* find_search(std::string_view name) const;
};

// `defines` are the -D arguments as written (name=value). With
// `only_strategy` naming a declared strategy, the file's other strategies
// are parsed but not elaborated: `--strategy A -D layers=2` is not refused
// for what layers = 2 does to strategy B.
std::unique_ptr<FrontendResult> check_files(const std::vector<std::string>& paths,
                                            const std::vector<std::string>& defines, SourceManager& sources,
                                            DiagnosticEngine& diags, std::string_view only_strategy = {});

// The same for one file's text held in memory (tests, fuzzing); its imports
// are still read from disk.
std::unique_ptr<FrontendResult> check_text(const std::string& path, std::string text,
                                           const std::vector<std::string>& defines, SourceManager& sources,
                                           DiagnosticEngine& diags);

// What the front end needs to know of a cluster.
struct ClusterFacts {
  int64_t num_devices = 0;
  int64_t device_memory_bytes = 0;
};

// Reports a mesh that needs more devices than the cluster has (with a note
// at the cluster reference).
void check_against_cluster(const CheckedStrategy& strategy, const ClusterFacts& facts, DiagnosticEngine& diags);

}  // namespace dstc::frontend
