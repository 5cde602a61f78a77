// tests/cpp/golden.h — loader for a SPEC §10 golden case folder: case.json (read by a small
// JSON reader, enough for these files: objects, arrays, strings, numbers, true/false/null)
// and the raw little-endian .bin arrays it names (bf16 as uint16 bit patterns).
#pragma once

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace golden {

// ---------------------------------------------------------------------------------------
// JSON
// ---------------------------------------------------------------------------------------
struct Json {
  enum class Type { kNull, kBool, kNumber, kString, kArray, kObject };
  Type type = Type::kNull;
  bool boolean = false;
  double number = 0;
  std::string str;
  std::vector<Json> arr;
  std::vector<std::pair<std::string, Json>> obj;

  bool is_null() const { return type == Type::kNull; }
  bool has(const std::string& k) const {
    for (auto& [key, v] : obj)
      if (key == k) return true;
    return false;
  }
  const Json& operator[](const std::string& k) const {
    for (auto& [key, v] : obj)
      if (key == k) return v;
    throw std::runtime_error("json: no key '" + k + "'");
  }
  const Json& operator[](size_t i) const { return arr.at(i); }
  double num() const {
    if (type != Type::kNumber) throw std::runtime_error("json: not a number");
    return number;
  }
  int64_t integer() const { return int64_t(num()); }
  bool truthy() const { return type == Type::kBool ? boolean : type == Type::kNumber ? number != 0 : false; }
};

class JsonParser {
 public:
  explicit JsonParser(const std::string& s) : s_(s) {}
  Json parse() {
    Json v = value();
    ws();
    if (i_ != s_.size()) fail("trailing characters");
    return v;
  }

 private:
  const std::string& s_;
  size_t i_ = 0;

  [[noreturn]] void fail(const std::string& why) const {
    throw std::runtime_error("json: " + why + " at offset " + std::to_string(i_));
  }
  void ws() {
    while (i_ < s_.size() && std::isspace((unsigned char)s_[i_])) ++i_;
  }
  bool eat(char c) {
    ws();
    if (i_ < s_.size() && s_[i_] == c) {
      ++i_;
      return true;
    }
    return false;
  }
  void expect(char c) {
    if (!eat(c)) fail(std::string("expected '") + c + "'");
  }
  bool word(const char* w) {
    const size_t n = std::strlen(w);
    if (s_.compare(i_, n, w) == 0) {
      i_ += n;
      return true;
    }
    return false;
  }
  std::string string() {
    expect('"');
    std::string out;
    while (i_ < s_.size() && s_[i_] != '"') {
      char c = s_[i_++];
      if (c == '\\') {
        if (i_ >= s_.size()) fail("bad escape");
        const char e = s_[i_++];
        switch (e) {
          case 'n': out += '\n'; break;
          case 't': out += '\t'; break;
          case 'r': out += '\r'; break;
          case 'b': out += '\b'; break;
          case 'f': out += '\f'; break;
          case 'u': {
            if (i_ + 4 > s_.size()) fail("bad \\u escape");
            const unsigned cp = unsigned(std::stoul(s_.substr(i_, 4), nullptr, 16));
            i_ += 4;
            if (cp < 0x80) {
              out += char(cp);
            } else if (cp < 0x800) {
              out += char(0xc0 | (cp >> 6));
              out += char(0x80 | (cp & 0x3f));
            } else {
              out += char(0xe0 | (cp >> 12));
              out += char(0x80 | ((cp >> 6) & 0x3f));
              out += char(0x80 | (cp & 0x3f));
            }
            break;
          }
          default: out += e;
        }
      } else {
        out += c;
      }
    }
    if (i_ >= s_.size()) fail("unterminated string");
    ++i_;
    return out;
  }
  Json value() {
    ws();
    if (i_ >= s_.size()) fail("unexpected end");
    Json v;
    const char c = s_[i_];
    if (c == '{') {
      ++i_;
      v.type = Json::Type::kObject;
      if (eat('}')) return v;
      do {
        ws();
        std::string k = string();
        expect(':');
        v.obj.emplace_back(std::move(k), value());
      } while (eat(','));
      expect('}');
    } else if (c == '[') {
      ++i_;
      v.type = Json::Type::kArray;
      if (eat(']')) return v;
      do v.arr.push_back(value());
      while (eat(','));
      expect(']');
    } else if (c == '"') {
      v.type = Json::Type::kString;
      v.str = string();
    } else if (word("true")) {
      v.type = Json::Type::kBool;
      v.boolean = true;
    } else if (word("false")) {
      v.type = Json::Type::kBool;
    } else if (word("null")) {
      v.type = Json::Type::kNull;
    } else if (word("NaN")) {
      v.type = Json::Type::kNumber;
      v.number = std::nan("");
    } else {
      const char* b = s_.c_str() + i_;
      char* e = nullptr;
      v.number = std::strtod(b, &e);
      if (e == b) fail("unexpected character");
      v.type = Json::Type::kNumber;
      i_ += size_t(e - b);
    }
    return v;
  }
};

inline Json parse_json(const std::string& text) { return JsonParser(text).parse(); }

// ---------------------------------------------------------------------------------------
// Case folders
// ---------------------------------------------------------------------------------------
inline std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw std::runtime_error("cannot open " + path);
  std::ostringstream os;
  os << f.rdbuf();
  return os.str();
}

struct Tensor {
  std::string dtype;  // "bf16", "f32", "i32"
  std::vector<int64_t> shape;
  std::vector<unsigned char> bytes;
  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
  }
  float f32(int64_t i) const {
    float f;
    std::memcpy(&f, bytes.data() + i * 4, 4);
    return f;
  }
  uint16_t bf16(int64_t i) const {
    uint16_t u;
    std::memcpy(&u, bytes.data() + i * 2, 2);
    return u;
  }
  int32_t i32(int64_t i) const {
    int32_t u;
    std::memcpy(&u, bytes.data() + i * 4, 4);
    return u;
  }
  void* data() { return bytes.data(); }
};

inline size_t dtype_bytes(const std::string& d) {
  if (d == "bf16" || d == "f16") return 2;
  if (d == "f32" || d == "i32") return 4;
  if (d == "f64" || d == "i64") return 8;
  throw std::runtime_error("golden: unknown dtype " + d);
}

struct Case {
  std::string dir, name;
  Json meta;
  int H = 0, W = 4, B = 0, q = 1, steps = 1, window = 0;
  int64_t pitch = 0, num_slots = 0;
  double eps = 1e-5;
  std::optional<float> lower_bound;
  std::map<std::string, Tensor> t;
  bool has(const std::string& k) const { return t.count(k) != 0; }
  const Tensor& at(const std::string& k) const { return t.at(k); }
  Tensor& at(const std::string& k) { return t.at(k); }
};

inline Case load_case(const std::string& dir) {
  Case c;
  c.dir = dir;
  c.meta = parse_json(read_file(dir + "/case.json"));
  const Json& m = c.meta;
  c.name = m["name"].str;
  c.H = int(m["H"].integer());
  c.W = int(m["W"].integer());
  c.B = int(m["B"].integer());
  c.q = int(m["q"].integer());
  c.steps = m.has("steps") ? int(m["steps"].integer()) : 1;
  c.window = int(m["window"].integer());
  c.pitch = m["pitch"].integer();
  c.num_slots = m["num_slots"].integer();
  c.eps = m["eps"].num();
  if (m.has("lower_bound") && !m["lower_bound"].is_null()) c.lower_bound = float(m["lower_bound"].num());
  if (int(m["K"].integer()) != 128 || int(m["V"].integer()) != 128 || int(m["R"].integer()) != 128)
    throw std::runtime_error("golden: K, V, R must be 128");
  for (auto& [name, tj] : m["tensors"].obj) {
    Tensor t;
    t.dtype = tj["dtype"].str;
    for (auto& d : tj["shape"].arr) t.shape.push_back(d.integer());
    const std::string raw = read_file(dir + "/" + tj["file"].str);
    const size_t want = size_t(t.numel()) * dtype_bytes(t.dtype);
    if (raw.size() != want)
      throw std::runtime_error("golden: " + name + " has " + std::to_string(raw.size()) + " bytes, expected " +
                               std::to_string(want));
    t.bytes.assign(raw.begin(), raw.end());
    c.t.emplace(name, std::move(t));
  }
  return c;
}

/// Case folders (those holding a case.json) under root, sorted by name.
inline std::vector<std::string> list_cases(const std::string& root) {
  std::vector<std::string> out;
  std::error_code ec;
  for (auto& e : std::filesystem::directory_iterator(root, ec))
    if (e.is_directory() && std::filesystem::exists(e.path() / "case.json")) out.push_back(e.path().string());
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace golden
