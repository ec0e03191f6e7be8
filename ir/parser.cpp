#include "ir/parser.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <climits>
#include <deque>
#include <unordered_map>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "ir/registry.h"
#include "ir/source/diagnostic_kinds.h"

namespace dstc::ir {

namespace {

enum class Tok : uint8_t {
  Ident,
  Int,
  Float,
  String,
  Value,
  Func,
  LParen,
  RParen,
  LBracket,
  RBracket,
  LBrace,
  RBrace,
  LAngle,
  RAngle,
  Comma,
  Equals,
  Colon,
  DotDot,
  End,
  Bad,
  BadString
};

struct Token {
  Tok kind = Tok::End;
  uint32_t begin = 0;
  uint32_t end = 0;
  std::string_view text;  // for Value and Func: the name without its sigil
  bool decoded = false;   // a string with escapes: text is not a view of the source
};

std::string_view describe(const Token& t) {
  switch (t.kind) {
    case Tok::End: return "end of file";
    case Tok::String: return "a string";
    case Tok::BadString: return "an unterminated string";
    default: return t.text;
  }
}

// Character classes by table: the lexer's hot path, and locale-independent.
struct CharClasses {
  bool ident_start[256] = {};
  bool ident[256] = {};
  bool name[256] = {};
  constexpr CharClasses() {
    for (int c = 0; c < 256; ++c) {
      bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
      bool digit = c >= '0' && c <= '9';
      ident_start[c] = alpha || c == '_';
      ident[c] = alpha || digit || c == '_';
      // compiler names: blocks[0].fc.weight, replicas: embed.table@stage3
      name[c] = ident[c] || c == '.' || c == '[' || c == ']' || c == '@';
    }
  }
};
constexpr CharClasses kChars;

bool is_ident_start(char c) { return kChars.ident_start[static_cast<unsigned char>(c)]; }
bool is_ident_char(char c) { return kChars.ident[static_cast<unsigned char>(c)]; }
bool is_name_char(char c) { return kChars.name[static_cast<unsigned char>(c)]; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }

class Lexer {
 public:
  explicit Lexer(std::string_view text) : text_(text) {}

  Token next() {
    skip_space();
    Token t;
    t.begin = pos_;
    if (pos_ >= text_.size()) {
      t.kind = Tok::End;
      t.end = pos_;
      return t;
    }
    char c = text_[pos_];
    auto single = [&](Tok k) {
      ++pos_;
      t.kind = k;
    };
    switch (c) {
      case '(': single(Tok::LParen); break;
      case ')': single(Tok::RParen); break;
      case '[': single(Tok::LBracket); break;
      case ']': single(Tok::RBracket); break;
      case '{': single(Tok::LBrace); break;
      case '}': single(Tok::RBrace); break;
      case '<': single(Tok::LAngle); break;
      case '>': single(Tok::RAngle); break;
      case ',': single(Tok::Comma); break;
      case '=': single(Tok::Equals); break;
      case ':': single(Tok::Colon); break;
      case '.':
        if (pos_ + 1 < text_.size() && text_[pos_ + 1] == '.') {
          pos_ += 2;
          t.kind = Tok::DotDot;
        } else {
          single(Tok::Bad);
        }
        break;
      case '%':
      case '@': {
        ++pos_;
        size_t start = pos_;
        while (pos_ < text_.size() && is_name_char(text_[pos_])) ++pos_;
        t.kind = pos_ == start ? Tok::Bad : (c == '%' ? Tok::Value : Tok::Func);
        t.end = static_cast<uint32_t>(pos_);
        t.text = pos_ == start ? text_.substr(t.begin, 1) : text_.substr(start, pos_ - start);
        return t;
      }
      case '"': lex_string(t); break;
      default:
        if (is_ident_start(c)) {
          while (pos_ < text_.size() && is_ident_char(text_[pos_])) ++pos_;
          t.kind = Tok::Ident;
        } else if (is_digit(c) || (c == '-' && pos_ + 1 < text_.size() && is_digit(text_[pos_ + 1]))) {
          lex_number(t);
        } else {
          // One UTF-8 sequence, so the message quotes a whole character.
          ++pos_;
          while (pos_ < text_.size() && (static_cast<unsigned char>(text_[pos_]) & 0xC0) == 0x80) ++pos_;
          t.kind = Tok::Bad;
        }
    }
    t.end = static_cast<uint32_t>(pos_);
    if (t.kind != Tok::String && t.kind != Tok::BadString) t.text = text_.substr(t.begin, t.end - t.begin);
    return t;
  }

 private:
  void skip_space() {
    while (pos_ < text_.size()) {
      char c = text_[pos_];
      if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
        ++pos_;
      } else if (c == '/' && pos_ + 1 < text_.size() && text_[pos_ + 1] == '/') {
        while (pos_ < text_.size() && text_[pos_] != '\n') ++pos_;
      } else {
        break;
      }
    }
  }

  void lex_number(Token& t) {
    if (text_[pos_] == '-') ++pos_;
    while (pos_ < text_.size() && is_digit(text_[pos_])) ++pos_;
    t.kind = Tok::Int;
    if (pos_ + 1 < text_.size() && text_[pos_] == '.' && is_digit(text_[pos_ + 1])) {
      t.kind = Tok::Float;
      ++pos_;
      while (pos_ < text_.size() && is_digit(text_[pos_])) ++pos_;
    }
    if (pos_ < text_.size() && (text_[pos_] == 'e' || text_[pos_] == 'E')) {
      size_t p = pos_ + 1;
      if (p < text_.size() && (text_[p] == '-' || text_[p] == '+')) ++p;
      if (p < text_.size() && is_digit(text_[p])) {
        t.kind = Tok::Float;
        pos_ = p;
        while (pos_ < text_.size() && is_digit(text_[pos_])) ++pos_;
      }
    }
  }

  // The token's text is the string's contents: a view of the source when it
  // has no escapes, else decoded into recent storage (t.decoded). An
  // unterminated string is BadString.
  void lex_string(Token& t) {
    size_t start = ++pos_;
    while (pos_ < text_.size() && text_[pos_] != '"' && text_[pos_] != '\\' && text_[pos_] != '\n') ++pos_;
    if (pos_ < text_.size() && text_[pos_] == '"') {
      t.kind = Tok::String;
      t.text = text_.substr(start, pos_ - start);
      ++pos_;
      return;
    }
    decoded_.emplace_back(text_.substr(start, pos_ - start));
    std::string& s = decoded_.back();
    while (pos_ < text_.size() && text_[pos_] != '"' && text_[pos_] != '\n') {
      char c = text_[pos_++];
      if (c == '\\' && pos_ < text_.size()) {
        char e = text_[pos_++];
        s += e == 'n' ? '\n' : e;
      } else {
        s += c;
      }
    }
    if (pos_ < text_.size() && text_[pos_] == '"') {
      ++pos_;
      t.kind = Tok::String;
      t.text = s;
      t.decoded = true;
    } else {
      t.kind = Tok::BadString;
    }
    if (decoded_.size() > 64) decoded_.pop_front();
  }

  std::string_view text_;
  size_t pos_ = 0;
  std::deque<std::string> decoded_;  // storage of recent string tokens
};

class Parser {
 public:
  Parser(FileId file, DiagnosticEngine& diags) : file_(file), diags_(diags), lexer_(diags.sources().file(file).text) {
    tok_ = lexer_.next();
  }

  std::optional<Module> run() {
    if (!parse_mesh()) return std::nullopt;
    while (tok_.kind != Tok::End) {
      if (!is_word("func")) {
        expected("'func' or the end of the file");
        return std::nullopt;
      }
      if (!parse_function()) return std::nullopt;
    }
    return std::move(module_);
  }

 private:
  // ---- tokens and errors ----
  void advance() {
    prev_end_ = tok_.end;
    tok_ = lexer_.next();
  }
  bool is_word(std::string_view w) const { return tok_.kind == Tok::Ident && tok_.text == w; }
  SourceRange range(const Token& t) const { return {file_, t.begin, std::max(t.end, t.begin + 1)}; }
  SourceRange range(uint32_t begin, uint32_t end) const { return {file_, begin, std::max(end, begin + 1)}; }

  bool error(DiagKind kind, SourceRange where, std::string message) {
    diags_.error(kind, where, std::move(message));
    return false;
  }
  bool expected(std::string_view what) {
    if (tok_.kind == Tok::BadString || tok_.kind == Tok::End)
      return error(diag::kIrSyntax, range(tok_), fmt::format("expected {}, found {}", what, describe(tok_)));
    return error(diag::kIrSyntax, range(tok_), fmt::format("expected {}, found '{}'", what, describe(tok_)));
  }
  bool expect(Tok kind, std::string_view what) {
    if (tok_.kind != kind) return expected(what);
    advance();
    return true;
  }
  bool expect_word(std::string_view word) {
    if (!is_word(word)) return expected(fmt::format("'{}'", word));
    advance();
    return true;
  }
  bool parse_int(int64_t& v, std::string_view what) {
    if (tok_.kind != Tok::Int) return expected(what);
    auto [ptr, ec] = std::from_chars(tok_.text.data(), tok_.text.data() + tok_.text.size(), v);
    if (ec != std::errc()) return error(diag::kIrSyntax, range(tok_), fmt::format("{} is out of range", tok_.text));
    advance();
    return true;
  }
  bool parse_small_int(int32_t& v, std::string_view what, int64_t min, int64_t max) {
    Token at = tok_;
    int64_t wide = 0;
    if (!parse_int(wide, what)) return false;
    if (wide < min || wide > max)
      return error(diag::kIrSyntax, range(at), fmt::format("{} must be in {}..{}, not {}", what, min, max, wide));
    v = static_cast<int32_t>(wide);
    return true;
  }

  // ---- mesh and device sets ----
  bool parse_mesh() {
    if (!is_word("mesh"))
      return error(diag::kIrMesh, range(tok_), "expected the mesh declaration 'mesh NAME[axis=size, ...]' first");
    Token keyword = tok_;
    advance();
    if (tok_.kind != Tok::Ident) return expected("the mesh name");
    std::string name(tok_.text);
    module_.mesh_range = range(keyword.begin, tok_.end);
    advance();
    if (!expect(Tok::LBracket, "'[' and the mesh axes")) return false;
    std::vector<MeshAxis> axes;
    int64_t total = 1;
    while (true) {
      Token at = tok_;
      if (tok_.kind != Tok::Ident) return expected("an axis name");
      MeshAxis axis{std::string(tok_.text), 0};
      for (const MeshAxis& a : axes) {
        if (a.name == axis.name)
          return error(diag::kIrMesh, range(at), fmt::format("axis '{}' is declared twice", a.name));
      }
      advance();
      if (!expect(Tok::Equals, "'=' and the axis size")) return false;
      if (!parse_small_int(axis.size, "an axis size", 1, 1 << 20)) return false;
      total *= axis.size;
      if (total > (1 << 24)) return error(diag::kIrMesh, range(at), "the mesh has more than 16777216 devices");
      axes.push_back(std::move(axis));
      if (axes.size() > kMaxMeshAxes)
        return error(diag::kIrMesh, range(at), fmt::format("a mesh has at most {} axes", kMaxMeshAxes));
      if (tok_.kind == Tok::Comma) {
        advance();
        continue;
      }
      if (!expect(Tok::RBracket, "',' or ']'")) return false;
      break;
    }
    Mesh mesh(std::move(name), std::move(axes));
    if (is_word("devices")) {
      Token at = tok_;
      advance();
      std::vector<int32_t> ids;
      if (!expect(Tok::LBracket, "'[' and one physical device id per rank")) return false;
      while (tok_.kind != Tok::RBracket) {
        int32_t id = 0;
        if (!parse_small_int(id, "a physical device id", 0, INT32_MAX)) return false;
        ids.push_back(id);
        if (tok_.kind == Tok::Comma)
          advance();
        else if (tok_.kind != Tok::RBracket)
          return expected("',' or ']'");
      }
      advance();
      if (static_cast<int64_t>(ids.size()) != mesh.size())
        return error(diag::kIrMesh, range(at),
                     fmt::format("the mesh has {} devices but {} physical ids are given", mesh.size(), ids.size()));
      mesh.set_physical(std::move(ids));
    }
    module_.set_mesh(std::move(mesh));
    return true;
  }

  bool parse_devices(DeviceSetId& id) {
    const Mesh& mesh = module_.mesh();
    uint32_t begin = tok_.begin;
    if (tok_.kind != Tok::Ident)
      return expected(fmt::format("a device set ('{}', '{}[axis=...]')", mesh.name(), mesh.name()));
    if (tok_.text != mesh.name())
      return error(diag::kIrDeviceSet, range(tok_),
                   fmt::format("unknown mesh '{}'; the mesh is '{}'", tok_.text, mesh.name()));
    advance();
    DeviceSet& set = set_;
    set.ranks.clear();
    if (tok_.kind == Tok::LBrace) {
      advance();
      while (true) {
        Token at = tok_;
        int32_t r = 0;
        if (!parse_small_int(r, "a rank", 0, INT32_MAX)) return false;
        if (r >= mesh.size())
          return error(diag::kIrDeviceSet, range(at),
                       fmt::format("rank {} is outside the mesh of {} devices", r, mesh.size()));
        for (Rank other : set.ranks) {
          if (other == r) return error(diag::kIrDeviceSet, range(at), fmt::format("rank {} is listed twice", r));
        }
        set.ranks.push_back(r);
        if (tok_.kind == Tok::Comma) {
          advance();
          continue;
        }
        if (!expect(Tok::RBrace, "',' or '}'")) return false;
        break;
      }
    } else {
      set.ranges.resize(static_cast<size_t>(mesh.axis_count()));
      for (int a = 0; a < mesh.axis_count(); ++a)
        set.ranges[static_cast<size_t>(a)] = {0, mesh.axes()[static_cast<size_t>(a)].size};
      if (tok_.kind == Tok::LBracket) {
        advance();
        std::vector<bool> seen(static_cast<size_t>(mesh.axis_count()), false);
        while (true) {
          Token at = tok_;
          if (tok_.kind != Tok::Ident) return expected("an axis name");
          int axis = mesh.axis_index(tok_.text);
          if (axis < 0)
            return error(diag::kIrDeviceSet, range(at),
                         fmt::format("mesh '{}' has no axis '{}'", mesh.name(), tok_.text));
          if (seen[static_cast<size_t>(axis)])
            return error(diag::kIrDeviceSet, range(at), fmt::format("axis '{}' is constrained twice", tok_.text));
          seen[static_cast<size_t>(axis)] = true;
          advance();
          if (!expect(Tok::Equals, "'=' and an index or range")) return false;
          int32_t size = mesh.axes()[static_cast<size_t>(axis)].size;
          Token index = tok_;
          AxisRange r;
          if (!parse_small_int(r.begin, "an axis index", 0, INT32_MAX)) return false;
          r.end = r.begin + 1;
          if (tok_.kind == Tok::DotDot) {
            advance();
            if (!parse_small_int(r.end, "the end of the range", 0, INT32_MAX)) return false;
          }
          if (r.begin >= r.end || r.end > size)
            return error(diag::kIrDeviceSet, range(index.begin, tok_.begin),
                         fmt::format("{} is outside axis '{}' of size {} (ranges are half-open: lo..hi)",
                                     std::string_view(lexer_text().substr(index.begin, tok_.begin - index.begin)),
                                     mesh.axes()[static_cast<size_t>(axis)].name, size));
          set.ranges[static_cast<size_t>(axis)] = r;
          if (tok_.kind == Tok::Comma) {
            advance();
            continue;
          }
          if (!expect(Tok::RBracket, "',' or ']'")) return false;
          break;
        }
      }
    }
    if (!set.is_slice()) set.ranges.clear();
    std::string_view written = lexer_text().substr(begin, prev_end_ - begin);
    auto cached = device_sets_.find(written);
    if (cached != device_sets_.end()) {
      id = cached->second;
    } else {
      id = module_.intern_devices(set);
      device_sets_.emplace(written, id);
    }
    return true;
  }

  std::string_view lexer_text() const { return diags_.sources().file(file_).text; }

  // ---- types and layouts ----
  bool parse_type(TypeId& id) {
    if (tok_.kind != Tok::Ident) return expected("a type such as f32[4, 8]");
    std::optional<DType> dtype = parse_dtype(tok_.text);
    if (!dtype)
      return error(
          diag::kIrSyntax, range(tok_),
          fmt::format("unknown element type '{}'; expected f32, f16, bf16, f64, i32, i64, i8 or u8", tok_.text));
    advance();
    if (!expect(Tok::LBracket, "'[' and the shape")) return false;
    TensorType t;
    t.dtype = *dtype;
    int64_t elements = 1;
    while (tok_.kind != Tok::RBracket) {
      Token at = tok_;
      int64_t d = 0;
      if (!parse_int(d, "a dimension size")) return false;
      if (d < 0) return error(diag::kIrSyntax, range(at), "dimension sizes must be >= 0");
      if (__builtin_mul_overflow(elements, d, &elements) || elements > kMaxTensorElements)
        return error(diag::kIrSyntax, range(at), "a tensor has at most 2^48 elements");
      if (t.rank == kMaxRank)
        return error(diag::kIrSyntax, range(at), fmt::format("a type has at most {} dimensions", kMaxRank));
      t.dims[t.rank++] = d;
      if (tok_.kind == Tok::Comma)
        advance();
      else if (tok_.kind != Tok::RBracket)
        return expected("',' or ']'");
    }
    advance();
    id = module_.intern_type(t);
    return true;
  }

  bool parse_layout(LayoutId& id) {
    const Mesh& mesh = module_.mesh();
    advance();  // sbp
    if (!expect(Tok::LParen, "'(' and one SBP per mesh axis")) return false;
    Layout layout(static_cast<size_t>(mesh.axis_count()));
    std::vector<bool> seen(layout.size(), false);
    while (tok_.kind != Tok::RParen) {
      if (tok_.kind != Tok::Ident) return expected("an axis name");
      int axis = mesh.axis_index(tok_.text);
      if (axis < 0)
        return error(diag::kIrLayout, range(tok_), fmt::format("mesh '{}' has no axis '{}'", mesh.name(), tok_.text));
      if (seen[static_cast<size_t>(axis)])
        return error(diag::kIrLayout, range(tok_), fmt::format("axis '{}' appears twice", tok_.text));
      seen[static_cast<size_t>(axis)] = true;
      advance();
      if (!expect(Tok::Equals, "'='")) return false;
      Sbp& sbp = layout[static_cast<size_t>(axis)];
      if (is_word("B")) {
        advance();
      } else if (is_word("S")) {
        advance();
        int32_t dim = 0;
        if (!expect(Tok::LParen, "'('")) return false;
        if (is_word("flat")) {
          advance();
          sbp = {Sbp::Flat, 0};
        } else {
          if (!parse_small_int(dim, "a split dimension", 0, kMaxRank - 1)) return false;
          sbp = {Sbp::Split, static_cast<uint8_t>(dim)};
        }
        if (!expect(Tok::RParen, "')'")) return false;
      } else if (is_word("P")) {
        advance();
        if (!expect(Tok::LParen, "'('")) return false;
        if (is_word("sum"))
          sbp.kind = Sbp::PartialSum;
        else if (is_word("max"))
          sbp.kind = Sbp::PartialMax;
        else
          return expected("'sum' or 'max'");
        advance();
        if (!expect(Tok::RParen, "')'")) return false;
      } else {
        return expected("B, S(dim), S(flat), P(sum) or P(max)");
      }
      if (tok_.kind == Tok::Comma)
        advance();
      else if (tok_.kind != Tok::RParen)
        return expected("',' or ')'");
    }
    advance();
    id = module_.intern_layout(layout);
    return true;
  }

  // ---- functions ----
  // A name of digits equal to the value's id is what the printer writes for
  // an unnamed value; it stays unnamed (no string is kept for it).
  static std::optional<ValueId> number_name(std::string_view name) {
    ValueId n = 0;
    auto [ptr, ec] = std::from_chars(name.data(), name.data() + name.size(), n);
    if (ec != std::errc() || ptr != name.data() + name.size()) return std::nullopt;
    return n;
  }
  StrId name_id(std::string_view name, ValueId id) {
    std::optional<ValueId> n = number_name(name);
    return n && *n == id ? 0 : module_.intern(name);
  }
  // The unnamed value a digits-only name stands for, if any.
  std::optional<ValueId> unnamed_value(std::string_view name) const {
    std::optional<ValueId> n = number_name(name);
    if (n && *n < function_->values.size() && function_->values[*n].name == 0) return n;
    return std::nullopt;
  }

  bool define(std::string_view name, const Token& at, ValueId id) {
    std::optional<ValueId> earlier;
    if (std::optional<ValueId> unnamed = unnamed_value(name); unnamed && *unnamed != id) earlier = unnamed;
    if (!earlier) {
      if (auto it = names_.find(name); it != names_.end()) earlier = it->second;
    }
    if (earlier) {
      diags_.error(diag::kIrRedefinedValue, range(at), fmt::format("value %{} is defined twice", name))
          .note(function_->value_range(*earlier), "first defined here");
      return false;
    }
    if (function_->values[id].name != 0) names_.emplace(name, id);
    return true;
  }

  bool parse_function() {
    advance();  // func
    if (tok_.kind != Tok::Func) return expected("a function name such as @step");
    if (module_.find_function(tok_.text) != nullptr)
      return error(diag::kIrSyntax, range(tok_), fmt::format("function @{} is defined twice", tok_.text));
    function_ = &module_.add_function(std::string(tok_.text));
    names_.clear();
    advance();
    if (!expect(Tok::LBrace, "'{'")) return false;
    Builder builder(module_, *function_);
    while (true) {
      if (tok_.kind == Tok::Ident) {
        if (tok_.text == "return") return parse_return();
        if (std::optional<ArgKind> kind = parse_arg_kind(tok_.text)) {
          if (!function_->ops.empty())
            return error(diag::kIrSyntax, range(tok_),
                         "arguments (param, state, input, cache) come before the first op");
          if (!parse_arg(builder, *kind)) return false;
          continue;
        }
      }
      if (tok_.kind == Tok::RBrace) return expected("'return' before '}'");
      if (!parse_op(builder)) return false;
    }
  }

  bool parse_return() {
    advance();
    if (tok_.kind == Tok::Value) {
      while (true) {
        ValueId v = 0;
        if (!parse_operand(v)) return false;
        function_->returns.push_back(v);
        if (tok_.kind != Tok::Comma) break;
        advance();
      }
    }
    return expect(Tok::RBrace, "'}' after the return");
  }

  bool parse_arg(Builder& builder, ArgKind kind) {
    advance();
    if (tok_.kind != Tok::Value) return expected("an argument name such as %w");
    Token name = tok_;
    advance();
    DeviceSetId devices = 0;
    TypeId type = 0;
    LayoutId layout = kNoLayout;
    if (!expect_word("on") || !parse_devices(devices) || !expect(Tok::Colon, "':' and the type") || !parse_type(type))
      return false;
    if (is_word("sbp") && !parse_layout(layout)) return false;
    TypeId logical = kNone;
    if (is_word("of")) {
      advance();
      if (!parse_type(logical)) return false;
    }
    InputData data;
    if (tok_.kind == Tok::LBrace) {
      if (!is_batch_data(kind))
        return error(diag::kIrAttribute, range(tok_),
                     fmt::format("only input and cache arguments describe their data; {} %{} takes no '{{...}}'",
                                 arg_kind_name(kind), name.text));
      if (!parse_input_data(data, module_.type(type))) return false;
    }
    auto next = static_cast<ValueId>(function_->values.size());
    ValueId id = builder.add_arg(number_name(name.text) == next ? std::string_view() : name.text, kind,
                                 module_.type(type), devices, layout, data);
    if (logical != kNone) builder.set_logical_type(id, module_.type(logical));
    function_->value_ranges.resize(function_->values.size());
    function_->value_ranges[id] = range(name);
    return define(name.text, name, id);
  }

  // {data = "x", batch_axis = 0, micro_batch = 1, micro_batches = 4, values = 10}
  bool parse_input_data(InputData& data, const TensorType& type) {
    static constexpr std::array<std::string_view, 5> kKeys = {"data", "batch_axis", "micro_batch", "micro_batches",
                                                              "values"};
    advance();
    std::vector<std::string_view> seen;
    while (tok_.kind != Tok::RBrace) {
      if (!seen.empty() && !expect(Tok::Comma, "',' or '}'")) return false;
      if (tok_.kind != Tok::Ident) return expected("an input data key");
      Token key = tok_;
      if (std::find(kKeys.begin(), kKeys.end(), key.text) == kKeys.end())
        return error(diag::kIrAttribute, range(key),
                     fmt::format("an input's data has no key '{}' (it takes {})", key.text, fmt::join(kKeys, ", ")));
      for (std::string_view k : seen) {
        if (k == key.text) return error(diag::kIrAttribute, range(key), fmt::format("'{}' is given twice", k));
      }
      seen.push_back(key.text);
      advance();
      if (!expect(Tok::Equals, "'='")) return false;
      if (key.text == "data") {
        if (tok_.kind != Tok::String) return expected("a string such as \"tokens\"");
        data.data = module_.intern(tok_.text);
        advance();
        continue;
      }
      Token value = tok_;
      int64_t v = 0;
      if (!parse_int(v, "an integer")) return false;
      const int64_t low = key.text == "micro_batches" || key.text == "values" ? 1 : 0;
      const int64_t high = key.text == "batch_axis" ? static_cast<int64_t>(type.rank) - 1 : INT32_MAX;
      if (v < low || v > high)
        return error(diag::kIrAttribute, range(value),
                     fmt::format("'{}' must lie in [{}, {}], found {}", key.text, low, high, v));
      if (key.text == "batch_axis") data.batch_axis = static_cast<int32_t>(v);
      if (key.text == "micro_batch") data.micro_batch = static_cast<int32_t>(v);
      if (key.text == "micro_batches") data.micro_batches = static_cast<int32_t>(v);
      if (key.text == "values") data.values = v;
    }
    Token close = tok_;
    advance();
    if (data.micro_batch >= data.micro_batches)
      return error(
          diag::kIrAttribute, range(close),
          fmt::format("micro_batch {} is not one of the {} micro-batches", data.micro_batch, data.micro_batches));
    if (data.micro_batch >= 0 && data.batch_axis < 0)
      return error(diag::kIrAttribute, range(close), "a micro-batch needs the batch_axis it is cut along");
    return true;
  }

  bool parse_operand(ValueId& v) {
    if (tok_.kind != Tok::Value) return expected("a value such as %x");
    if (std::optional<ValueId> unnamed = unnamed_value(tok_.text)) {
      v = *unnamed;
    } else {
      auto it = names_.find(tok_.text);
      if (it == names_.end())
        return error(diag::kIrUndefinedValue, range(tok_),
                     fmt::format("value %{} is not defined before this use", tok_.text));
      v = it->second;
    }
    advance();
    return true;
  }

  bool parse_attr(const OpInfo& info, std::vector<AttrValue>& attrs) {
    if (tok_.kind != Tok::Ident) return expected("an attribute name");
    Token name = tok_;
    int slot = info.attr_slot(name.text);
    if (slot < 0) {
      std::string known;
      for (const AttrSpec& a : info.attrs) known += fmt::format("{}{}", known.empty() ? "" : ", ", a.name);
      return error(diag::kIrAttribute, range(name),
                   fmt::format("{} has no attribute '{}'{}", info.name, name.text,
                               known.empty() ? "; it takes none" : fmt::format(" (it takes {})", known)));
    }
    for (const AttrValue& a : attrs) {
      if (a.name == name.text)
        return error(diag::kIrAttribute, range(name), fmt::format("attribute '{}' is given twice", name.text));
    }
    advance();
    if (!expect(Tok::Equals, "'='")) return false;
    const AttrSpec& spec = info.attrs[static_cast<size_t>(slot)];
    Token value = tok_;
    AttrValue a;
    a.name = spec.name;
    a.type = spec.type;
    auto mistyped = [&](std::string_view want) {
      if (value.kind == Tok::BadString)
        return error(diag::kIrSyntax, range(value), "unterminated string: a string ends with '\"' on its own line");
      return error(diag::kIrAttribute, range(value),
                   fmt::format("attribute '{}' of {} is {}, found '{}'", spec.name, info.name, want, describe(value)));
    };
    switch (spec.type) {
      case AttrType::Int:
        if (tok_.kind != Tok::Int) return mistyped("an integer");
        if (!parse_int(a.i, "an integer")) return false;
        break;
      case AttrType::Float:
        if (tok_.kind != Tok::Int && tok_.kind != Tok::Float) return mistyped("a number");
        if (!std::from_chars(tok_.text.data(), tok_.text.data() + tok_.text.size(), a.f).ptr)
          return mistyped("a number");
        advance();
        break;
      case AttrType::Bool:
        if (!is_word("true") && !is_word("false")) return mistyped("true or false");
        a.i = tok_.text == "true" ? 1 : 0;
        advance();
        break;
      case AttrType::String:
        if (tok_.kind != Tok::String) return mistyped("a string");
        if (tok_.decoded) {
          strings_.emplace_back(tok_.text);
          a.s = strings_.back();
        } else {
          a.s = tok_.text;  // a view of the source, which outlives the parse
        }
        advance();
        break;
      case AttrType::IntList: {
        if (tok_.kind != Tok::LBracket) return mistyped("a list of integers");
        advance();
        size_t offset = list_arena_.size();
        while (tok_.kind != Tok::RBracket) {
          int64_t v = 0;
          if (!parse_int(v, "an integer")) return false;
          list_arena_.push_back(v);
          if (tok_.kind == Tok::Comma)
            advance();
          else if (tok_.kind != Tok::RBracket)
            return expected("',' or ']'");
        }
        advance();
        // The arena may still grow: point into it once all attributes are read.
        list_slots_.push_back({attrs.size(), offset, list_arena_.size() - offset});
        break;
      }
    }
    attrs.push_back(a);
    return true;
  }

  // `fill 0.5 mean 0.25`: the share of a value's elements that is data on
  // the fullest device, and averaged (default: the same), each in (0, 1].
  bool parse_fill(Fill& fill) {
    auto share = [&](float& into) {
      advance();  // fill, mean
      double v = 0;
      if ((tok_.kind != Tok::Int && tok_.kind != Tok::Float) ||
          !std::from_chars(tok_.text.data(), tok_.text.data() + tok_.text.size(), v).ptr || !(v > 0 && v <= 1))
        return expected("a share in (0, 1]");
      into = static_cast<float>(v);
      advance();
      return true;
    };
    if (is_word("fill")) {
      if (!share(fill.fullest)) return false;
      fill.mean = fill.fullest;
    }
    if (!is_word("mean")) return true;
    Token mean = tok_;
    if (!share(fill.mean)) return false;
    if (fill.mean > fill.fullest)
      return error(diag::kIrSyntax, range(mean),
                   fmt::format("the mean fill {} is above the fullest device's, {}", fill.mean, fill.fullest));
    return true;
  }

  bool parse_meta(OpMeta& meta) {
    advance();  // <
    while (tok_.kind != Tok::RAngle) {
      if (tok_.kind != Tok::Ident) return expected("stage, mb, phase or loc");
      Token key = tok_;
      advance();
      if (!expect(Tok::Equals, "'='")) return false;
      if (key.text == "stage") {
        int32_t v = 0;
        if (!parse_small_int(v, "a stage", 0, INT16_MAX)) return false;
        meta.stage = static_cast<int16_t>(v);
      } else if (key.text == "mb") {
        if (!parse_small_int(meta.micro_batch, "a micro-batch", 0, INT32_MAX)) return false;
      } else if (key.text == "phase") {
        std::optional<Phase> phase = tok_.kind == Tok::Ident ? parse_phase(tok_.text) : std::nullopt;
        if (!phase) return expected("a phase (forward, input_grad, weight_grad, recompute, optimizer)");
        meta.phase = *phase;
        advance();
      } else if (key.text == "loc") {
        if (tok_.kind != Tok::String) return expected("a quoted .dstrat file name");
        SourceLoc loc;
        loc.file = module_.intern(tok_.text);
        advance();
        int32_t line = 0, column = 0;
        if (!expect(Tok::Colon, "':' and a line") || !parse_small_int(line, "a line", 1, INT32_MAX) ||
            !expect(Tok::Colon, "':' and a column") || !parse_small_int(column, "a column", 1, INT32_MAX))
          return false;
        loc.line = static_cast<uint32_t>(line);
        loc.column = static_cast<uint32_t>(column);
        meta.loc = module_.intern_loc(loc);
      } else if (key.text == "scope") {
        if (meta.loc == kNoLoc) return error(diag::kIrSyntax, range(key), "scope=\"...\" follows a loc");
        if (tok_.kind != Tok::String) return expected("a quoted module path");
        SourceLoc loc = module_.loc(meta.loc);
        loc.scope = module_.intern(tok_.text);
        advance();
        meta.loc = module_.intern_loc(loc);
      } else {
        return error(diag::kIrSyntax, range(key),
                     fmt::format("expected stage, mb, phase, loc or scope, found '{}'", key.text));
      }
      if (tok_.kind == Tok::Comma)
        advance();
      else if (tok_.kind != Tok::RAngle)
        return expected("',' or '>'");
    }
    advance();
    return true;
  }

  bool parse_groups(GroupListId& groups) {
    advance();  // groups
    if (!expect(Tok::LBracket, "'[' and the groups")) return false;
    std::vector<std::vector<Rank>> list;
    while (tok_.kind != Tok::RBracket) {
      if (!expect(Tok::LBracket, "'[' and the ranks of a group")) return false;
      list.emplace_back();
      while (tok_.kind != Tok::RBracket) {
        Token at = tok_;
        int32_t r = 0;
        if (!parse_small_int(r, "a rank", 0, INT32_MAX)) return false;
        if (r >= module_.mesh().size())
          return error(diag::kIrDeviceSet, range(at),
                       fmt::format("rank {} is outside the mesh of {} devices", r, module_.mesh().size()));
        list.back().push_back(r);
        if (tok_.kind == Tok::Comma)
          advance();
        else if (tok_.kind != Tok::RBracket)
          return expected("',' or ']'");
      }
      advance();
      if (tok_.kind == Tok::Comma)
        advance();
      else if (tok_.kind != Tok::RBracket)
        return expected("',' or ']'");
    }
    advance();
    groups = module_.add_groups(std::move(list));
    return true;
  }

  bool parse_over(uint16_t& axes) {
    advance();  // over
    if (!expect(Tok::LBracket, "'[' and mesh axes")) return false;
    while (tok_.kind != Tok::RBracket) {
      if (tok_.kind != Tok::Ident) return expected("an axis name");
      int axis = module_.mesh().axis_index(tok_.text);
      if (axis < 0)
        return error(diag::kIrDeviceSet, range(tok_),
                     fmt::format("mesh '{}' has no axis '{}'", module_.mesh().name(), tok_.text));
      axes = static_cast<uint16_t>(axes | (1u << axis));
      advance();
      if (tok_.kind == Tok::Comma)
        advance();
      else if (tok_.kind != Tok::RBracket)
        return expected("',' or ']'");
    }
    advance();
    return true;
  }

  bool parse_op(Builder& builder) {
    uint32_t start = tok_.begin;
    std::vector<Token>& results = result_tokens_;
    results.clear();
    if (tok_.kind == Tok::Value) {
      while (true) {
        if (tok_.kind != Tok::Value) return expected("a result name such as %y");
        results.push_back(tok_);
        advance();
        if (tok_.kind != Tok::Comma) break;
        advance();
      }
      if (!expect(Tok::Equals, "'=' after the results")) return false;
    }
    if (tok_.kind != Tok::Ident) return expected("an op, an argument (param, state, input) or 'return'");
    std::optional<OpKind> kind = find_kind(tok_.text);
    if (!kind) return error(diag::kIrUnknownOp, range(tok_), fmt::format("unknown op '{}'", tok_.text));
    const OpInfo& info = op_info(*kind);
    uint32_t name_end = tok_.end;
    advance();

    operands_.clear();
    if (!expect(Tok::LParen, "'(' and the operands")) return false;
    while (tok_.kind != Tok::RParen) {
      ValueId v = 0;
      if (!parse_operand(v)) return false;
      operands_.push_back(v);
      if (tok_.kind == Tok::Comma)
        advance();
      else if (tok_.kind != Tok::RParen)
        return expected("',' or ')'");
    }
    advance();

    attrs_.clear();
    strings_.clear();
    list_arena_.clear();
    list_slots_.clear();
    if (tok_.kind == Tok::LBrace) {
      advance();
      while (tok_.kind != Tok::RBrace) {
        if (!parse_attr(info, attrs_)) return false;
        if (tok_.kind == Tok::Comma)
          advance();
        else if (tok_.kind != Tok::RBrace)
          return expected("',' or '}'");
      }
      advance();
      for (const ListSlot& slot : list_slots_) attrs_[slot.attr].list = {list_arena_.data() + slot.offset, slot.size};
    }

    OpSpec spec;
    spec.kind = *kind;
    if (!expect_word("on") || !parse_devices(spec.devices)) return false;
    if (info.category == OpCategory::Collective) {
      if (is_word("over")) {
        if (!parse_over(spec.group_axes)) return false;
      } else if (is_word("groups")) {
        if (!parse_groups(spec.groups)) return false;
      } else {
        return expected(fmt::format("'over [axes]' or 'groups [[ranks], ...]' for {}", info.name));
      }
    } else if (info.category == OpCategory::PointToPoint) {
      bool send = *kind == OpKind::Send;
      if (!expect_word(send ? "to" : "from") || !parse_devices(spec.peer) || !expect_word("channel")) return false;
      int64_t channel = 0;
      Token at = tok_;
      if (!parse_int(channel, "a channel number")) return false;
      if (channel < 0 || channel > INT32_MAX)
        return error(diag::kIrSyntax, range(at), "channel numbers are in 0..2147483647");
      spec.channel = static_cast<uint32_t>(channel);
    }
    if (is_word("stream")) {
      advance();
      std::optional<Stream> stream = tok_.kind == Tok::Ident ? parse_stream(tok_.text) : std::nullopt;
      if (!stream) return expected("a stream (compute, feature, grad)");
      spec.meta.stream = *stream;
      advance();
    }
    if (tok_.kind == Tok::LAngle && !parse_meta(spec.meta)) return false;

    types_.clear();
    layouts_.clear();
    logicals_.clear();
    fills_.clear();
    if (!results.empty()) {
      if (!expect(Tok::Colon, "':' and the result types")) return false;
      while (true) {
        TypeId t = 0;
        LayoutId layout = kNoLayout;
        if (!parse_type(t)) return false;
        if (is_word("sbp") && !parse_layout(layout)) return false;
        TypeId logical = kNone;
        if (is_word("of")) {
          advance();
          if (!parse_type(logical)) return false;
        }
        Fill fill;
        if (!parse_fill(fill)) return false;
        types_.push_back(t);
        layouts_.push_back(layout);
        logicals_.push_back(logical);
        fills_.push_back(fill);
        if (tok_.kind != Tok::Comma) break;
        advance();
      }
      if (types_.size() != results.size())
        return error(diag::kIrSyntax, range(start, name_end),
                     fmt::format("{} results are named but {} types are given", results.size(), types_.size()));
    }
    // An op whose result types cannot be inferred (recv) must be given them.
    if (types_.empty() && op_info(spec.kind).infer == nullptr)
      return error(diag::kIrSyntax, range(start, name_end),
                   fmt::format("{} names its result and gives its type: %x = {}(...) ... : f32[4]", op_name(spec.kind),
                               op_name(spec.kind)));
    names_scratch_.clear();
    for (size_t i = 0; i < results.size(); ++i)
      names_scratch_.push_back(name_id(results[i].text, static_cast<ValueId>(function_->values.size() + i)));

    // Shape rules read their operands by position: when one will infer the
    // result types, a count it does not take is reported here, before it
    // runs (with the types given, the verifier reports it).
    if (types_.empty() && (operands_.size() < info.min_operands ||
                           (info.max_operands != kVariadic && operands_.size() > info.max_operands))) {
      std::string want = info.max_operands == kVariadic ? fmt::format("at least {}", info.min_operands)
                         : info.min_operands == info.max_operands
                             ? fmt::format("{}", info.min_operands)
                             : fmt::format("{} to {}", info.min_operands, info.max_operands);
      return error(diag::kIrSignature, range(start, name_end),
                   fmt::format("{} takes {} operand(s), not {}", info.name, want, operands_.size()));
    }
    spec.operands = operands_;
    spec.attrs = attrs_;
    spec.result_types = types_;
    spec.result_layouts = layouts_;
    spec.result_names = names_scratch_;
    OpId op = 0;
    try {
      op = builder.append(spec);
    } catch (const IrBuildError& e) {  // a shape rule refused the operands it infers from
      return error(diag::kIrType, range(start, name_end), e.what());
    }
    function_->op_ranges.resize(function_->ops.size());
    function_->op_ranges[op] = range(start, name_end);
    function_->value_ranges.resize(function_->values.size());
    for (size_t i = 0; i < results.size(); ++i) {
      ValueId v = function_->ops[op].first_result + static_cast<ValueId>(i);
      function_->value_ranges[v] = range(results[i]);
      if (i < logicals_.size() && logicals_[i] != kNone) {
        // A recv is given its logical type; other ops derive it.
        TypeId derived = function_->values[v].logical;
        if (derived != kNone && derived != logicals_[i])
          return error(diag::kIrLayout, range(results[i]),
                       fmt::format("%{} is written of {}, but its operand makes it of {}", results[i].text,
                                   to_string(module_.type(logicals_[i])), to_string(module_.type(derived))));
        function_->values[v].logical = logicals_[i];
      }
      if (i < fills_.size()) function_->values[v].fill = fills_[i];
      if (!define(results[i].text, results[i], v)) return false;
    }
    return true;
  }

  static std::optional<OpKind> find_kind(std::string_view name) {
    static const std::unordered_map<std::string_view, OpKind> kinds = [] {
      std::unordered_map<std::string_view, OpKind> m;
      for (int i = 0; i < kOpKindCount; ++i) m.emplace(op_name(static_cast<OpKind>(i)), static_cast<OpKind>(i));
      return m;
    }();
    auto it = kinds.find(name);
    return it == kinds.end() ? std::nullopt : std::optional<OpKind>(it->second);
  }

  FileId file_;
  DiagnosticEngine& diags_;
  Lexer lexer_;
  Token tok_;
  uint32_t prev_end_ = 0;  // end of the token before tok_
  Module module_;
  Function* function_ = nullptr;
  std::unordered_map<std::string_view, ValueId> names_;
  // Per-op scratch, reused to avoid allocating per op.
  std::vector<Token> result_tokens_;
  std::vector<ValueId> operands_;
  std::vector<AttrValue> attrs_;
  std::deque<std::string> strings_;
  struct ListSlot {
    size_t attr;
    size_t offset;
    size_t size;
  };
  std::vector<int64_t> list_arena_;
  std::vector<ListSlot> list_slots_;
  DeviceSet set_;                                                  // scratch for parse_devices
  std::unordered_map<std::string_view, DeviceSetId> device_sets_;  // by their text
  std::vector<TypeId> types_;
  std::vector<LayoutId> layouts_;
  std::vector<TypeId> logicals_;  // a result's logical type (S(flat)), or kNone
  std::vector<Fill> fills_;       // a result's fill (1: all of it)
  std::vector<StrId> names_scratch_;
};

}  // namespace

std::optional<Module> parse_module(FileId file, DiagnosticEngine& diags) { return Parser(file, diags).run(); }

std::optional<Module> parse_file(SourceManager& sources, const std::string& path, DiagnosticEngine& diags) {
  std::optional<FileId> file = sources.find(path);
  if (!file) {
    std::string reason;
    file = sources.load(path, reason);
    if (!file) {
      diags.error(diag::kIrFileUnreadable, SourceRange{}, fmt::format("cannot read '{}': {}", path, reason));
      return std::nullopt;
    }
  }
  return parse_module(*file, diags);
}

}  // namespace dstc::ir
