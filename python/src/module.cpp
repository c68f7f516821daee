// kvsim._core: llm_datadist's Python API (spec §2–§6) over impl/, on the simulated world, plus
// kvsim's world, job, event and memory helpers. The packages llm_datadist and kvsim re-export it.
#include <pybind11/eval.h>
#include <pybind11/functional.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "impl/cache_manager.h"
#include "impl/comm_domain.h"
#include "impl/kv_cache_manager.h"
#include "impl/llm_datadist.h"
#include "impl/status.h"
#include "impl/types.h"
#include "model/errors.h"
#include "python/src/py_host_memory.h"
#include "python/src/py_kv_cache.h"
#include "python/src/py_launch_server.h"
#include "python/src/py_processes.h"
#include "python/src/py_results.h"
#include "python/src/py_world.h"
#include "sim/scenario.h"
#include "sim/world_inventory.h"

namespace py = pybind11;
using namespace pybind11::literals;

namespace kvsim::python {

// Python enum classes made at import (llm_datadist's enums are enum.Enum / enum.IntEnum).
template <class E>
py::object& enum_class() {
  static auto* cls = new py::object();  // leaked: must not be released after interpreter exit
  return *cls;
}

}  // namespace kvsim::python

namespace pybind11::detail {

template <class E>
struct py_enum_caster {
  bool load(handle src, bool) {
    if (!isinstance(src, kvsim::python::enum_class<E>())) return false;
    value = static_cast<E>(src.attr("value").cast<std::int64_t>());
    return true;
  }
  static handle cast(E v, return_value_policy, handle) {
    return kvsim::python::enum_class<E>()(static_cast<std::int64_t>(v)).release();
  }
  E value{};
  using Base = E;
  template <typename T>
  using cast_op_type = movable_cast_op_type<T>;
  operator E&() { return value; }
  operator E&&() && { return std::move(value); }
  operator E*() { return &value; }
};

#define KVSIM_ENUM_CASTER(E, NAME)                 \
  template <>                                      \
  struct type_caster<E> : py_enum_caster<E> {      \
    static constexpr auto name = const_name(NAME); \
  };

KVSIM_ENUM_CASTER(kvsim::impl::LLMRole, "LLMRole")
KVSIM_ENUM_CASTER(kvsim::impl::Placement, "Placement")
KVSIM_ENUM_CASTER(kvsim::impl::DataType, "DataType")
KVSIM_ENUM_CASTER(kvsim::impl::Memtype, "Memtype")
KVSIM_ENUM_CASTER(kvsim::impl::RegisterMemStatus, "RegisterMemStatus")

// LLMStatusCode: the C++-only codes 20–23 are not in Python's enum and read as LLM_FAILED (§6).
template <>
struct type_caster<kvsim::impl::LLMStatusCode> : py_enum_caster<kvsim::impl::LLMStatusCode> {
  static constexpr auto name = const_name("LLMStatusCode");
  static handle cast(kvsim::impl::LLMStatusCode v, return_value_policy p, handle h) {
    if (!kvsim::impl::in_python_enum(v)) v = kvsim::impl::LLMStatusCode::LLM_FAILED;
    return py_enum_caster<kvsim::impl::LLMStatusCode>::cast(v, p, h);
  }
};

// A Python range (layer ranges).
template <>
struct type_caster<kvsim::impl::LayerRange> {
  PYBIND11_TYPE_CASTER(kvsim::impl::LayerRange, const_name("range"));
  bool load(handle src, bool) {
    if (!PyObject_TypeCheck(src.ptr(), &PyRange_Type)) return false;
    value.start = src.attr("start").cast<std::int64_t>();
    value.stop = src.attr("stop").cast<std::int64_t>();
    value.step = src.attr("step").cast<std::int64_t>();
    return true;
  }
  static handle cast(const kvsim::impl::LayerRange& r, return_value_policy, handle) {
    return module_::import("builtins").attr("range")(r.start, r.stop, r.step).release();
  }
};

}  // namespace pybind11::detail

namespace kvsim::python {
namespace {

using impl::CacheView;
using impl::LLMStatusCode;

py::object& llm_exception_class() {
  static auto* cls = new py::object();
  return *cls;
}
py::object& layer_synchronizer_class() {
  static auto* cls = new py::object();
  return *cls;
}

// Python's check_uint64 on an arbitrary object: TypeError unless int, ValueError out of range.
std::uint64_t to_u64(const char* name, py::handle h) {
  if (!PyLong_Check(h.ptr())) throw impl::TypeError(name, "must be int");
  const unsigned long long v = PyLong_AsUnsignedLongLong(h.ptr());
  if (v == static_cast<unsigned long long>(-1) && PyErr_Occurred()) {
    PyErr_Clear();
    throw impl::ValueError(name, "must be in [0, 2**64-1]");
  }
  return v;
}

// Python's check_uint32: TypeError unless int, ValueError out of range (IPv4 as int).
std::uint32_t to_u32(const char* name, py::handle h) {
  const std::uint64_t v = to_u64(name, h);
  if (v > UINT32_MAX) throw impl::ValueError(name, "must be in [0, 2**32-1]");
  return static_cast<std::uint32_t>(v);
}

// An int that impl range-checks itself (int64 here); TypeError unless int.
std::int64_t to_i64(const char* name, py::handle h) {
  if (!PyLong_Check(h.ptr())) throw impl::TypeError(name, "must be int");
  int overflow = 0;
  const long long v = PyLong_AsLongLongAndOverflow(h.ptr(), &overflow);
  if (overflow != 0) throw impl::ValueError(name, "is out of range");
  return v;
}

// None or a list/tuple of int (TypeError), each uint64 (ValueError) (§3.1 item 2).
std::optional<std::vector<std::int64_t>> to_index_list(const char* name, py::handle h) {
  if (h.is_none()) return std::nullopt;
  if (!PyList_Check(h.ptr()) && !PyTuple_Check(h.ptr())) {
    throw impl::TypeError(name, "must be None or a list or tuple of int");
  }
  std::vector<std::int64_t> out;
  for (py::handle item : h) {
    const std::string at = std::string(name) + "[" + std::to_string(out.size()) + "]";
    out.push_back(static_cast<std::int64_t>(to_u64(at.c_str(), item)));
  }
  return out;
}

std::vector<std::uint64_t> to_addr_list(const char* name, py::handle h) {
  if (!PyList_Check(h.ptr()) && !PyTuple_Check(h.ptr())) {
    throw impl::TypeError(name, "must be a list or tuple of int");
  }
  std::vector<std::uint64_t> out;
  for (py::handle item : h) {
    const std::string at = std::string(name) + "[" + std::to_string(out.size()) + "]";
    out.push_back(to_u64(at.c_str(), item));
  }
  return out;
}

std::optional<impl::LayerRange> to_range(const char* name, py::handle h) {
  if (h.is_none()) return std::nullopt;
  if (!PyObject_TypeCheck(h.ptr(), &PyRange_Type)) throw impl::TypeError(name, "must be a range");
  // Bounds beyond int64 are a ValueError naming the bound, not a failed cast.
  const auto bound = [&](const char* part) {
    const std::string at = std::string(name) + "." + part;
    return to_i64(at.c_str(), h.attr(part));
  };
  impl::LayerRange r;
  r.start = bound("start");
  r.stop = bound("stop");
  r.step = bound("step");
  return r;
}

// Positional-or-keyword arguments with aliases ("cluster_id|prompt_cluster_id").
std::vector<py::object> parse_args(const char* func, const py::args& args, const py::kwargs& kwargs,
                                   const std::vector<std::string>& names, std::size_t required) {
  if (args.size() > names.size()) {
    throw impl::TypeError(func, "takes at most " + std::to_string(names.size()) + " arguments");
  }
  std::vector<py::object> out(names.size());
  for (std::size_t i = 0; i < args.size(); ++i) out[i] = args[i];
  for (auto [key, value] : kwargs) {
    const std::string k = py::str(key);
    bool found = false;
    for (std::size_t i = 0; i < names.size() && !found; ++i) {
      std::string alts = names[i] + "|";
      for (std::size_t p = 0, q; (q = alts.find('|', p)) != std::string::npos; p = q + 1) {
        if (alts.substr(p, q - p) == k) {
          if (out[i]) throw impl::TypeError(func, "got multiple values for argument '" + k + "'");
          out[i] = py::reinterpret_borrow<py::object>(value);
          found = true;
          break;
        }
      }
    }
    if (!found) throw impl::TypeError(func, "got an unexpected keyword argument '" + k + "'");
  }
  for (std::size_t i = 0; i < required; ++i) {
    if (!out[i]) throw impl::TypeError(func, "missing required argument '" + names[i] + "'");
  }
  return out;
}

// A str argument (check_isinstance(name, value, str)): TypeError otherwise.
std::string to_str(const char* name, py::handle h) {
  if (!py::isinstance<py::str>(h)) throw impl::TypeError(name, "must be str");
  return h.cast<std::string>();
}

// link's cluster_rank_info, checked in the real Python's order (§4, hixl llm_datadist.py): a
// dict (TypeError), int keys and values (TypeError), at most 4 entries (LLMException), keys
// uint64 and values uint32 (ValueError). The remaining rules are impl's.
impl::ClusterRankInfo to_cluster_rank_info(py::handle h) {
  if (!PyDict_Check(h.ptr())) throw impl::TypeError("cluster_rank_info", "must be dict");
  const auto dict = py::reinterpret_borrow<py::dict>(h);
  for (auto [key, value] : dict) {
    if (!PyLong_Check(key.ptr()) || !PyLong_Check(value.ptr())) {
      throw impl::TypeError("cluster_rank_info", "must be a dict of int to int");
    }
  }
  if (dict.size() > impl::kMaxCommMembers) {
    impl::throw_param_invalid("cluster_rank_info", "size can not be greater than 4");
  }
  impl::ClusterRankInfo out;
  for (auto [key, value] : dict) {
    const std::uint64_t cluster = to_u64("cluster_rank_info key", key);
    const std::int64_t rank = to_i64("cluster_rank_info value", value);
    impl::check_uint32("cluster_rank_info value", rank);
    out.emplace_back(cluster, static_cast<std::uint32_t>(rank));
  }
  return out;
}

void raise_llm_exception(LLMStatusCode code, const char* what) {
  py::object status = py::cast(code);
  py::object exc = llm_exception_class()(py::str(what), "status_code"_a = status);
  PyErr_SetObject(llm_exception_class().ptr(), exc.ptr());
}

// A Python LayerSynchronizer seen by impl; calls run on the task's job (§3.2). It also holds the
// task's source cache object: the job keeps both alive until it ends, as the library's worker
// thread holds its arguments, so a v1 KvCache dropped mid-transfer is not deallocated under it.
class PySynchronizer final : public impl::LayerSynchronizer {
 public:
  PySynchronizer(py::handle obj, py::handle src_cache) : obj_(obj), src_cache_(src_cache) {}
  bool synchronize_layer(std::int64_t layer, std::optional<std::int64_t>) override {
    PythonEntry entry;
    PyObject* r = PyObject_CallMethod(obj_.get(), "synchronize_layer", "(LO)",
                                      static_cast<long long>(layer), Py_None);
    int truth = -1;
    if (r != nullptr) {
      truth = PyObject_IsTrue(r);
      Py_DECREF(r);
    }
    if (truth < 0) {
      throw std::runtime_error(
          take_python_error("Exception in transfer_cache_async task, synchronize_layer(" +
                            std::to_string(layer) + "):"));
    }
    return truth == 1;
  }

 private:
  PyRef obj_;
  PyRef src_cache_;
};

// CacheManager.transfer_cache_async / KvCacheManager.transfer_cache_async argument handling:
// converts, calls, then writes the configs' src_layer_range back to the caller's objects (§3.1
// item 6 mutates them in place).
template <class Call>
impl::CacheTask transfer_async(py::handle src_cache, py::handle layer_synchronizer,
                               py::handle transfer_configs, py::handle src_block_indices,
                               py::handle dst_block_indices, py::handle dst_block_memory_size,
                               const Call& call) {
  std::shared_ptr<impl::LayerSynchronizer> sync;
  if (!layer_synchronizer.is_none() &&
      py::isinstance(layer_synchronizer, layer_synchronizer_class())) {
    sync = std::make_shared<PySynchronizer>(layer_synchronizer, src_cache);
  } else if (!layer_synchronizer.is_none()) {
    throw impl::TypeError("layer_synchronizer", "must be a LayerSynchronizer");
  }
  impl::TransferBlockArgs blocks;
  blocks.src_block_indices = to_index_list("src_block_indices", src_block_indices);
  blocks.dst_block_indices = to_index_list("dst_block_indices", dst_block_indices);
  if (!dst_block_memory_size.is_none()) {
    blocks.dst_block_memory_size =
        static_cast<std::int64_t>(to_u64("dst_block_memory_size", dst_block_memory_size));
  }
  if (!PyList_Check(transfer_configs.ptr()) && !PyTuple_Check(transfer_configs.ptr())) {
    throw impl::TypeError("transfer_configs", "must be a list or tuple");
  }
  std::vector<impl::AnyTransferConfig> configs;
  std::vector<py::handle> originals;
  for (py::handle c : transfer_configs) {
    if (py::isinstance<impl::TransferConfig>(c)) {
      configs.emplace_back(c.cast<impl::TransferConfig>());
    } else if (py::isinstance<impl::TransferWithCacheKeyConfig>(c)) {
      configs.emplace_back(c.cast<impl::TransferWithCacheKeyConfig>());
    } else {
      throw impl::TypeError("transfer_configs[" + std::to_string(originals.size()) + "]",
                            "must be a TransferConfig or TransferWithCacheKeyConfig");
    }
    originals.push_back(c);
  }
  const auto write_back = [&] {
    for (std::size_t i = 0; i < configs.size(); ++i) {
      if (auto* tc = std::get_if<impl::TransferConfig>(&configs[i])) {
        originals[i].cast<impl::TransferConfig&>().set_src_layer_range(tc->src_layer_range());
      } else {
        auto& kc = std::get<impl::TransferWithCacheKeyConfig>(configs[i]);
        originals[i].cast<impl::TransferWithCacheKeyConfig&>().set_src_layer_range(
            kc.src_layer_range());
      }
    }
  };
  try {
    impl::CacheTask task = call(sync, configs, blocks);
    write_back();
    return task;
  } catch (...) {
    write_back();
    throw;
  }
}

// A CacheTask with the world it runs in.
struct TaskHandle {
  std::shared_ptr<WorldBox> box;
  impl::CacheTask task;
};

// The cache managers hold their LLMDataDist alive and reach the engine through it.
// `adopt` gives Python a cache the manager allocated: v1 KvCaches deallocate themselves when
// collected (py_kv_cache.h).
struct CacheManagerHandle {
  py::object owner;
  DataDistHandle* dist;
  impl::CacheManager& get() const { return dist->get().cache_manager(); }
  CacheView adopt(CacheView cache) const { return cache; }
};
struct KvCacheManagerHandle {
  py::object owner;
  DataDistHandle* dist;
  impl::KvCacheManager& get() const { return dist->get().kv_cache_manager(); }
  KvCacheHolder adopt(impl::KvCache cache) const {
    return owned_kv_cache(std::move(cache), owner, *dist);
  }
};

// A background Python function started by kvsim.spawn.
struct JobState {
  std::unique_ptr<impl::Signal> done;
  std::unique_ptr<PyRef> exception;
  std::string name;
};
struct JobHandle {
  std::shared_ptr<WorldBox> box;
  std::shared_ptr<JobState> state;
};

JobHandle start_job(py::function fn, const std::string& name);

// `value` if it names one of `count` devices or nodes, else ValueError("no device 9").
int checked_index(const char* what, int value, int count) {
  if (value < 0 || value >= count) {
    throw impl::ValueError(what, std::string("no ") + what + " " + std::to_string(value));
  }
  return value;
}

// A one-shot flag in simulated time (kvsim.Event).
struct EventHandle {
  std::shared_ptr<WorldBox> box;
  std::unique_ptr<impl::Signal> signal;
};

impl::Time seconds_to_time(double seconds, const char* name) {
  if (!(seconds >= 0) || !std::isfinite(seconds)) {
    throw impl::ValueError(name, "must be a finite number of seconds >= 0");
  }
  if (seconds >= 9.2e6) {  // simulated time is a 64-bit count of picoseconds
    throw impl::ValueError(name, "must be below 9.2e6 seconds (2^63 ps of simulated time)");
  }
  return static_cast<impl::Time>(std::llround(seconds * 1e12));
}

impl::Time optional_timeout(const std::optional<double>& seconds) {
  return seconds ? seconds_to_time(*seconds, "timeout") : impl::kForever;
}

sim::SystemcPlatform& platform() {
  return live(current_world()).platform();
}

template <class E>
void make_enum(py::module_& m, const char* kind, const char* name, const std::vector<E>& values) {
  std::vector<std::pair<std::string, std::int64_t>> members;
  for (E v : values)
    members.emplace_back(std::string(impl::to_string(v)), static_cast<std::int64_t>(v));
  py::object cls =
      py::module_::import("enum").attr(kind)(name, py::cast(members), "module"_a = "llm_datadist");
  enum_class<E>() = cls;
  m.attr(name) = cls;
}

const char* kPythonClasses = R"(
import abc

class LLMException(RuntimeError):
    """An llm_datadist error carrying an LLMStatusCode (spec 2.3)."""

    def __init__(self, *args, status_code=None):
        super().__init__(*args)
        self._status_code = (LLMStatusCode.LLM_FAILED if status_code is None
                             else status_code)

    @property
    def status_code(self):
        return self._status_code


class LayerSynchronizer(abc.ABC):
    """Subclass and implement synchronize_layer (spec 2.2)."""

    @abc.abstractmethod
    def synchronize_layer(self, layer_index, timeout_in_millis):
        """Wait until layer_index is computed; True starts its transfer."""
        raise NotImplementedError


LLMException.__module__ = 'llm_datadist'
LayerSynchronizer.__module__ = 'llm_datadist'
)";

void bind_enums(py::module_& m) {
  using namespace impl;
  make_enum<LLMRole>(m, "IntEnum", "LLMRole", {LLMRole::PROMPT, LLMRole::DECODER, LLMRole::MIX});
  make_enum<Placement>(m, "IntEnum", "Placement", {Placement::HOST, Placement::DEVICE});
  make_enum<Memtype>(m, "Enum", "Memtype", {Memtype::MEM_TYPE_DEVICE, Memtype::MEM_TYPE_HOST});
  make_enum<RegisterMemStatus>(
      m, "Enum", "RegisterMemStatus",
      {RegisterMemStatus::OK, RegisterMemStatus::PREPARING, RegisterMemStatus::FAILED});
  make_enum<DataType>(
      m, "Enum", "DataType",
      {DataType::DT_FLOAT, DataType::DT_FLOAT16, DataType::DT_BF16, DataType::DT_INT8,
       DataType::DT_INT16, DataType::DT_UINT16, DataType::DT_UINT8, DataType::DT_INT32,
       DataType::DT_INT64, DataType::DT_UINT32, DataType::DT_UINT64, DataType::DT_BOOL,
       DataType::DT_DOUBLE, DataType::DT_STRING});
  std::vector<LLMStatusCode> codes;
  for (LLMStatusCode c : all_status_codes()) {
    if (in_python_enum(c)) codes.push_back(c);
  }
  make_enum<LLMStatusCode>(m, "Enum", "LLMStatusCode", codes);

  py::dict ns;
  ns["__builtins__"] = py::module_::import("builtins");
  ns["__name__"] = "llm_datadist";
  ns["LLMStatusCode"] = m.attr("LLMStatusCode");
  py::exec(kPythonClasses, ns);
  llm_exception_class() = ns["LLMException"];
  layer_synchronizer_class() = ns["LayerSynchronizer"];
  m.attr("LLMException") = ns["LLMException"];
  m.attr("LayerSynchronizer") = ns["LayerSynchronizer"];

  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const impl::LLMException& e) {
      raise_llm_exception(e.status_code(), e.what());
    } catch (const impl::TypeError& e) {
      PyErr_SetString(PyExc_TypeError, e.what());
    } catch (const impl::ValueError& e) {
      PyErr_SetString(PyExc_ValueError, e.what());
    } catch (const impl::RuntimeError& e) {
      PyErr_SetString(PyExc_RuntimeError, e.what());
    } catch (const model::ModelError& e) {
      PyErr_SetString(PyExc_ValueError, e.what());
    } catch (const std::invalid_argument& e) {
      PyErr_SetString(PyExc_ValueError, e.what());
    } catch (const std::logic_error& e) {
      PyErr_SetString(PyExc_RuntimeError, e.what());
    }
  });
}

std::string range_repr(const std::optional<impl::LayerRange>& r) {
  return r ? impl::to_string(*r) : "None";
}

void bind_values(py::module_& m) {
  using namespace impl;
  py::class_<CacheDesc>(m, "CacheDesc")
      .def(py::init([](py::object num_tensors, std::vector<std::int64_t> shape, DataType data_type,
                       Placement placement, py::object batch_dim_index,
                       py::object seq_len_dim_index, std::optional<std::string> fmt) {
             return CacheDesc(to_i64("num_tensors", num_tensors), std::move(shape), data_type,
                              placement, to_i64("batch_dim_index", batch_dim_index),
                              to_i64("seq_len_dim_index", seq_len_dim_index), std::move(fmt));
           }),
           "num_tensors"_a, "shape"_a, "data_type"_a, "placement"_a = Placement::DEVICE,
           "batch_dim_index"_a = 0, "seq_len_dim_index"_a = -1, "kv_tensor_format"_a = py::none())
      .def_property_readonly("num_tensors", &CacheDesc::num_tensors)
      .def_property_readonly("shape", &CacheDesc::shape)
      .def_property_readonly("data_type", &CacheDesc::data_type)
      .def_property_readonly("placement", &CacheDesc::placement)
      .def_property_readonly("batch_dim_index", &CacheDesc::batch_dim_index)
      .def_property_readonly("seq_len_dim_index", &CacheDesc::seq_len_dim_index)
      .def_property_readonly("kv_tensor_format", &CacheDesc::kv_tensor_format)
      .def_property_readonly("size", &CacheDesc::size)
      // Values pickle as the library's plain Python classes do, so that a launched program's
      // calls can carry them (python/kvsim/launch/python_calls.py) and programs can send them.
      .def(py::pickle(
          [](const CacheDesc& d) {
            return py::make_tuple(d.num_tensors(), d.shape(), d.data_type(), d.placement(),
                                  d.batch_dim_index(), d.seq_len_dim_index(), d.kv_tensor_format());
          },
          [](py::tuple t) {
            return CacheDesc(t[0].cast<std::int64_t>(), t[1].cast<std::vector<std::int64_t>>(),
                             t[2].cast<DataType>(), t[3].cast<Placement>(),
                             t[4].cast<std::int64_t>(), t[5].cast<std::int64_t>(),
                             t[6].cast<std::optional<std::string>>());
          }))
      .def("__repr__", [](const CacheDesc& d) {
        std::string s = "CacheDesc(num_tensors=" + std::to_string(d.num_tensors()) + ", shape=[";
        for (std::size_t i = 0; i < d.shape().size(); ++i) {
          s += (i ? ", " : "") + std::to_string(d.shape()[i]);
        }
        return s + "], data_type=DataType." + std::string(to_string(d.data_type())) +
               ", placement=Placement." + std::string(to_string(d.placement())) + ")";
      });

  py::class_<CacheView>(m, "Cache")
      .def_readonly("cache_id", &CacheView::cache_id)
      .def_readonly("cache_desc", &CacheView::desc)
      .def_readonly("tensor_addrs", &CacheView::tensor_addrs)
      .def_readonly("is_blocks_cache", &CacheView::is_blocks_cache)
      .def(py::pickle(
          [](const CacheView& c) {
            return py::make_tuple(c.cache_id, c.desc, c.tensor_addrs, c.is_blocks_cache,
                                  c.remote_accessible, c.mix);
          },
          [](py::tuple t) {
            return CacheView{t[0].cast<std::int64_t>(),
                             t[1].cast<CacheDesc>(),
                             t[2].cast<std::vector<std::uint64_t>>(),
                             t[3].cast<bool>(),
                             t[4].cast<bool>(),
                             t[5].cast<bool>()};
          }))
      .def_static(
          "create_cpu_cache",
          [](const CacheDesc& desc, py::object addrs) {
            auto a = to_addr_list("addrs", addrs);
            validate_create_cpu_cache(desc, a);
            // llm_types.py Cache.create_cpu_cache: cls(-1, desc, addrs, None, False, True).
            return CacheView{-1, desc, std::move(a), /*is_blocks_cache=*/true};
          },
          "cache_desc"_a, "addrs"_a)
      .def("__repr__", [](const CacheView& c) {
        return "Cache(cache_id=" + std::to_string(c.cache_id) +
               ", is_blocks_cache=" + (c.is_blocks_cache ? "True" : "False") + ")";
      });

  py::class_<KvCache, KvCacheHolder>(m, "KvCache")
      .def_property_readonly("cache_id", &KvCache::cache_id)
      .def_property_readonly("cache_desc", &KvCache::cache_desc)
      .def_property_readonly("per_device_tensor_addrs", &KvCache::per_device_tensor_addrs)
      .def_property_readonly("is_blocks_cache", &KvCache::is_blocks_cache);

  py::class_<CacheKey>(m, "CacheKey")
      .def(py::init([](py::args args, py::kwargs kwargs) {
        auto a = parse_args("CacheKey", args, kwargs,
                            {"cluster_id|prompt_cluster_id", "req_id", "model_id", "prefix_id"}, 2);
        CacheKey k;
        k.cluster_id = to_u64("cluster_id", a[0]);
        k.req_id = to_u64("req_id", a[1]);
        if (a[2]) k.model_id = to_u64("model_id", a[2]);
        if (a[3]) k.prefix_id = to_u64("prefix_id", a[3]);
        return k;
      }))
      .def_readonly("cluster_id", &CacheKey::cluster_id)
      .def_readonly("prompt_cluster_id", &CacheKey::cluster_id)
      .def_readonly("req_id", &CacheKey::req_id)
      .def_readonly("model_id", &CacheKey::model_id)
      .def_readonly("prefix_id", &CacheKey::prefix_id)
      .def(py::pickle(
          [](const CacheKey& k) {
            return py::make_tuple(k.cluster_id, k.req_id, k.model_id, k.prefix_id);
          },
          [](py::tuple t) {
            CacheKey k;
            k.cluster_id = t[0].cast<std::uint64_t>();
            k.req_id = t[1].cast<std::uint64_t>();
            k.model_id = t[2].cast<std::uint64_t>();
            k.prefix_id = t[3].cast<std::uint64_t>();
            return k;
          }));

  py::class_<CacheKeyByIdAndIndex>(m, "CacheKeyByIdAndIndex")
      .def(py::init([](py::object cluster_id, py::object cache_id, py::object batch_index) {
             return CacheKeyByIdAndIndex(to_u64("cluster_id", cluster_id),
                                         to_i64("cache_id", cache_id),
                                         to_i64("batch_index", batch_index));
           }),
           "cluster_id"_a, "cache_id"_a, "batch_index"_a = 0)
      .def_property_readonly("cluster_id", &CacheKeyByIdAndIndex::cluster_id)
      .def_property_readonly("cache_id", &CacheKeyByIdAndIndex::cache_id)
      .def_property_readonly("batch_index", &CacheKeyByIdAndIndex::batch_index)
      .def(py::pickle(
          [](const CacheKeyByIdAndIndex& k) {
            return py::make_tuple(k.cluster_id(), k.cache_id(), k.batch_index());
          },
          [](py::tuple t) {
            return CacheKeyByIdAndIndex(t[0].cast<std::uint64_t>(), t[1].cast<std::int64_t>(),
                                        t[2].cast<std::int64_t>());
          }));

  py::class_<BlocksCacheKey>(m, "BlocksCacheKey")
      .def(py::init([](py::args args, py::kwargs kwargs) {
        auto a = parse_args("BlocksCacheKey", args, kwargs,
                            {"cluster_id|prompt_cluster_id", "model_id"}, 1);
        BlocksCacheKey k;
        k.cluster_id = to_u64("cluster_id", a[0]);
        if (a[1]) k.model_id = to_u64("model_id", a[1]);
        return k;
      }))
      .def_readonly("cluster_id", &BlocksCacheKey::cluster_id)
      .def_readonly("prompt_cluster_id", &BlocksCacheKey::cluster_id)
      .def_readonly("model_id", &BlocksCacheKey::model_id)
      .def(py::pickle(
          [](const BlocksCacheKey& k) { return py::make_tuple(k.cluster_id, k.model_id); },
          [](py::tuple t) {
            BlocksCacheKey k;
            k.cluster_id = t[0].cast<std::uint64_t>();
            k.model_id = t[1].cast<std::uint64_t>();
            return k;
          }));

  py::class_<TransferConfig>(m, "TransferConfig")
      .def(py::init([](py::object dst_cluster_id, py::object dst_addrs, py::object range,
                       py::object src_batch_index) {
             return TransferConfig(
                 to_u64("dst_cluster_id", dst_cluster_id), to_addr_list("dst_addrs", dst_addrs),
                 to_range("src_layer_range", range), to_i64("src_batch_index", src_batch_index));
           }),
           "dst_cluster_id"_a, "dst_addrs"_a, "src_layer_range"_a = py::none(),
           "src_batch_index"_a = 0)
      .def_property("dst_cluster_id", &TransferConfig::dst_cluster_id,
                    [](TransferConfig& c, py::object v) {
                      c.set_dst_cluster_id(to_u64("dst_cluster_id", v));
                    })
      .def_property(
          "dst_addrs", &TransferConfig::dst_addrs,
          [](TransferConfig& c, py::object v) { c.set_dst_addrs(to_addr_list("dst_addrs", v)); })
      .def_property("src_layer_range", &TransferConfig::src_layer_range,
                    [](TransferConfig& c, py::object v) {
                      c.set_src_layer_range(to_range("src_layer_range", v));
                    })
      .def_property("src_batch_index", &TransferConfig::src_batch_index,
                    [](TransferConfig& c, py::object v) {
                      c.set_src_batch_index(to_i64("src_batch_index", v));
                    })
      .def_property("dst_layer_range", &TransferConfig::dst_layer_range,
                    &TransferConfig::set_dst_layer_range)
      .def(py::pickle(
          [](const TransferConfig& c) {
            return py::make_tuple(c.dst_cluster_id(), c.dst_addrs(), c.src_layer_range(),
                                  c.src_batch_index(), c.dst_layer_range());
          },
          [](py::tuple t) {
            TransferConfig c(t[0].cast<std::uint64_t>(), t[1].cast<std::vector<std::uint64_t>>(),
                             t[2].cast<std::optional<LayerRange>>(), t[3].cast<std::int64_t>());
            c.set_dst_layer_range(t[4].cast<std::optional<LayerRange>>());
            return c;
          }))
      .def("__repr__", [](const TransferConfig& c) {
        return "TransferConfig(dst_cluster_id=" + std::to_string(c.dst_cluster_id()) +
               ", src_layer_range=" + range_repr(c.src_layer_range()) +
               ", src_batch_index=" + std::to_string(c.src_batch_index()) + ")";
      });

  py::class_<TransferWithCacheKeyConfig>(m, "TransferWithCacheKeyConfig")
      .def(py::init([](TransferCacheKey key, py::object src, py::object dst, py::object index) {
             return TransferWithCacheKeyConfig(std::move(key), to_range("src_layer_range", src),
                                               to_range("dst_layer_range", dst),
                                               to_i64("src_batch_index", index));
           }),
           "cache_key"_a, "src_layer_range"_a, "dst_layer_range"_a, "src_batch_index"_a = 0)
      .def_property("cache_key", &TransferWithCacheKeyConfig::cache_key,
                    &TransferWithCacheKeyConfig::set_cache_key)
      .def_property("src_layer_range", &TransferWithCacheKeyConfig::src_layer_range,
                    [](TransferWithCacheKeyConfig& c, py::object v) {
                      c.set_src_layer_range(to_range("src_layer_range", v));
                    })
      .def_property("dst_layer_range", &TransferWithCacheKeyConfig::dst_layer_range,
                    [](TransferWithCacheKeyConfig& c, py::object v) {
                      c.set_dst_layer_range(to_range("dst_layer_range", v));
                    })
      .def_property("src_batch_index", &TransferWithCacheKeyConfig::src_batch_index,
                    [](TransferWithCacheKeyConfig& c, py::object v) {
                      c.set_src_batch_index(to_i64("src_batch_index", v));
                    })
      .def_property_readonly("dst_cluster_id", &TransferWithCacheKeyConfig::dst_cluster_id)
      .def(py::pickle(
          [](const TransferWithCacheKeyConfig& c) {
            return py::make_tuple(c.cache_key(), c.src_layer_range(), c.dst_layer_range(),
                                  c.src_batch_index());
          },
          [](py::tuple t) {
            return TransferWithCacheKeyConfig(
                t[0].cast<TransferCacheKey>(), t[1].cast<std::optional<LayerRange>>(),
                t[2].cast<std::optional<LayerRange>>(), t[3].cast<std::int64_t>());
          }));

  py::class_<LLMClusterInfo>(m, "LLMClusterInfo")
      .def(py::init<>())
      .def_property("remote_cluster_id", &LLMClusterInfo::remote_cluster_id,
                    [](LLMClusterInfo& c, py::object v) {
                      c.set_remote_cluster_id(to_u64("remote_cluster_id", v));
                    })
      .def_property("remote_role_type", &LLMClusterInfo::remote_role_type,
                    &LLMClusterInfo::set_remote_role_type)
      .def(
          "append_local_ip_info",
          [](LLMClusterInfo& c, py::object ip, py::object port) {
            const std::int64_t p = to_i64("port", port);
            if (py::isinstance<py::str>(ip)) {
              c.append_local_ip_info(ip.cast<std::string>(), p);
            } else {
              c.append_local_ip_info(to_u32("ip", ip), p);
            }
          },
          "ip"_a, "port"_a)
      .def(
          "append_remote_ip_info",
          [](LLMClusterInfo& c, py::object ip, py::object port) {
            const std::int64_t p = to_i64("port", port);
            if (py::isinstance<py::str>(ip)) {
              c.append_remote_ip_info(ip.cast<std::string>(), p);
            } else {
              c.append_remote_ip_info(to_u32("ip", ip), p);
            }
          },
          "ip"_a, "port"_a)
      .def(py::pickle(
          [](const LLMClusterInfo& c) {
            const auto pairs = [](const std::vector<IpInfo>& list) {
              std::vector<std::pair<std::uint32_t, std::uint16_t>> out;
              for (const IpInfo& i : list) out.emplace_back(i.ip, i.port);
              return out;
            };
            return py::make_tuple(c.remote_cluster_id(), c.remote_role_type(),
                                  pairs(c.local_ip_info_list()), pairs(c.remote_ip_info_list()));
          },
          [](py::tuple t) {
            LLMClusterInfo c;
            if (auto id = t[0].cast<std::optional<std::uint64_t>>()) c.set_remote_cluster_id(*id);
            if (auto role = t[1].cast<std::optional<LLMRole>>()) c.set_remote_role_type(*role);
            using Pairs = std::vector<std::pair<std::uint32_t, std::uint16_t>>;
            for (const auto& [ip, port] : t[2].cast<Pairs>()) c.append_local_ip_info(ip, port);
            for (const auto& [ip, port] : t[3].cast<Pairs>()) c.append_remote_ip_info(ip, port);
            return c;
          }));

  py::class_<LLMConfig>(m, "LLMConfig")
      .def(py::init<>())
      .def_property("device_id", &LLMConfig::device_id,
                    [](LLMConfig& c, py::object v) { c.set_device_id(to_i64("device_id", v)); })
      .def_property("sync_kv_timeout", &LLMConfig::sync_kv_timeout,
                    [](LLMConfig& c, py::object v) {
                      if (py::isinstance<py::str>(v)) {
                        c.set_sync_kv_timeout(v.cast<std::string>());
                      } else {
                        c.set_sync_kv_timeout(to_i64("sync_kv_timeout", v));
                      }
                    })
      .def_property("listen_ip_info", &LLMConfig::listen_ip_info, &LLMConfig::set_listen_ip_info)
      .def_property("enable_cache_manager", &LLMConfig::enable_cache_manager,
                    &LLMConfig::set_enable_cache_manager)
      .def_property("enable_remote_cache_accessible", &LLMConfig::enable_remote_cache_accessible,
                    &LLMConfig::set_enable_remote_cache_accessible)
      .def_property("enable_switch_role", &LLMConfig::enable_switch_role,
                    &LLMConfig::set_enable_switch_role)
      .def_property("mem_pool_cfg", &LLMConfig::mem_pool_cfg, &LLMConfig::set_mem_pool_cfg)
      .def_property("host_mem_pool_cfg", &LLMConfig::host_mem_pool_cfg,
                    &LLMConfig::set_host_mem_pool_cfg)
      .def_property("buf_pool_cfg", &LLMConfig::buf_pool_cfg, &LLMConfig::set_buf_pool_cfg)
      .def_property(
          "link_total_time", &LLMConfig::link_total_time,
          [](LLMConfig& c, py::object v) { c.set_link_total_time(to_i64("link_total_time", v)); })
      .def_property(
          "link_retry_count", &LLMConfig::link_retry_count,
          [](LLMConfig& c, py::object v) { c.set_link_retry_count(to_i64("link_retry_count", v)); })
      .def_property("rdma_traffic_class", &LLMConfig::rdma_traffic_class,
                    [](LLMConfig& c, py::object v) {
                      c.set_rdma_traffic_class(to_i64("rdma_traffic_class", v));
                    })
      .def_property("rdma_service_level", &LLMConfig::rdma_service_level,
                    [](LLMConfig& c, py::object v) {
                      c.set_rdma_service_level(to_i64("rdma_service_level", v));
                    })
      .def_property("local_comm_res", &LLMConfig::local_comm_res, &LLMConfig::set_local_comm_res)
      .def_property("transfer_backend", &LLMConfig::transfer_backend,
                    &LLMConfig::set_transfer_backend)
      .def_property("global_resource_config", &LLMConfig::global_resource_config,
                    &LLMConfig::set_global_resource_config)
      .def_property("mem_utilization", &LLMConfig::mem_utilization, &LLMConfig::set_mem_utilization)
      .def_property("output_max_size", &LLMConfig::output_max_size, &LLMConfig::set_output_max_size)
      .def_property("deploy_res_path", &LLMConfig::deploy_res_path, &LLMConfig::set_deploy_res_path)
      .def_property("ge_options", &LLMConfig::ge_options, &LLMConfig::set_ge_options)
      .def("generate_options", &LLMConfig::generate_options);
}

impl::LayerArgs layer_args(py::object src, py::object dst, py::object tpl) {
  return impl::LayerArgs{to_range("src_layer_range", src), to_range("dst_layer_range", dst),
                         to_i64("tensor_num_per_layer", tpl)};
}

// The methods v1 KvCacheManager and v2 CacheManager share (spec 1, 4): same signatures over
// their own cache type. Keywords differ: `cache_arg` ("kv_cache" in v1, "cache" in v2) and
// `pull_blocks_arg` ("kv_cache" in v1, "dst_cache" in v2).
template <typename Handle, typename Cache>
void bind_shared_cache_methods(py::class_<Handle>& cls, const char* cache_arg,
                               const char* pull_blocks_arg) {
  using namespace impl;
  cls.def(
         "allocate_cache",
         [](Handle& h, const CacheDesc& desc, std::vector<CacheKey> keys) {
           return h.adopt(h.get().allocate_cache(desc, keys));
         },
         "cache_desc"_a, "cache_keys"_a = py::tuple())
      .def(
          "deallocate_cache", [](Handle& h, const Cache& c) { h.get().deallocate_cache(c); },
          py::arg(cache_arg))
      .def(
          "allocate_blocks_cache",
          [](Handle& h, const CacheDesc& desc, std::optional<BlocksCacheKey> key) {
            return h.adopt(h.get().allocate_blocks_cache(desc, key));
          },
          "cache_desc"_a, "blocks_cache_key"_a = py::none())
      .def(
          "deallocate_blocks_cache",
          [](Handle& h, const Cache& c) { h.get().deallocate_blocks_cache(c); }, py::arg(cache_arg))
      .def(
          "remove_cache_key", [](Handle& h, const CacheKey& k) { h.get().remove_cache_key(k); },
          "cache_key"_a)
      .def(
          "pull_cache",
          [](Handle& h, PullCacheKey key, const Cache& cache, std::int64_t batch_index,
             std::int64_t size, py::object src, py::object dst, py::object tpl) {
            h.get().pull_cache(key, cache, batch_index, size, layer_args(src, dst, tpl));
          },
          "cache_key"_a, py::arg(cache_arg), "batch_index"_a = 0, "size"_a = -1, py::kw_only(),
          "src_layer_range"_a = py::none(), "dst_layer_range"_a = py::none(),
          "tensor_num_per_layer"_a = kTensorsPerLayer)
      .def(
          "pull_blocks",
          [](Handle& h, PullBlocksKey key, const Cache& cache, std::vector<std::int64_t> src_blocks,
             std::vector<std::int64_t> dst_blocks, py::object src, py::object dst, py::object tpl) {
            h.get().pull_blocks(key, cache, src_blocks, dst_blocks, layer_args(src, dst, tpl));
          },
          "src_cache_key"_a, py::arg(pull_blocks_arg), "src_blocks"_a = py::tuple(),
          "dst_blocks"_a = py::tuple(), py::kw_only(), "src_layer_range"_a = py::none(),
          "dst_layer_range"_a = py::none(), "tensor_num_per_layer"_a = kTensorsPerLayer)
      .def(
          "transfer_cache_async",
          [](Handle& h, const Cache& src_cache, py::object layer_synchronizer,
             py::object transfer_configs, py::object src_block_indices,
             py::object dst_block_indices, py::object dst_block_memory_size) {
            auto& km = h.get();
            impl::CacheTask task = transfer_async(
                py::cast(&src_cache, py::return_value_policy::reference), layer_synchronizer,
                transfer_configs, src_block_indices, dst_block_indices, dst_block_memory_size,
                [&](std::shared_ptr<impl::LayerSynchronizer> sync,
                    std::vector<AnyTransferConfig>& configs, const TransferBlockArgs& blocks) {
                  return km.transfer_cache_async(src_cache, std::move(sync), configs, blocks);
                });
            return TaskHandle{h.dist->box(), task};
          },
          "src_cache"_a, "layer_synchronizer"_a, "transfer_configs"_a,
          "src_block_indices"_a = py::none(), "dst_block_indices"_a = py::none(),
          "dst_block_memory_size"_a = py::none(), py::keep_alive<0, 2>())
      .def(
          "swap_blocks",
          [](Handle& h, const Cache& src, const Cache& dst,
             std::map<std::int64_t, std::int64_t> src_to_dst) {
            if constexpr (std::is_same_v<Cache, CacheView>) {
              // CPU caches may hold the program's own memory (create_cpu_cache of CPU tensors).
              WorldBox& box = *h.dist->box();
              const int device = h.dist->get().core()->device();
              const CacheView s = mirror_host_memory(box, src, device);
              const CacheView d = mirror_host_memory(box, dst, device);
              h.get().swap_blocks(s, d, src_to_dst);
              write_back_host_memory(box, dst, d);
            } else {
              h.get().swap_blocks(src, dst, src_to_dst);
            }
          },
          "src"_a, "dst"_a, "src_to_dst"_a);
}

void bind_engine(py::module_& m) {
  using namespace impl;
  py::class_<TaskHandle>(m, "CacheTask")
      .def(
          "synchronize",
          [](TaskHandle& t, std::optional<std::int64_t> timeout_in_millis) {
            live(t.box);
            return t.task.synchronize(timeout_in_millis);
          },
          "timeout_in_millis"_a = py::none())
      .def(
          "get_results",
          [](TaskHandle& t, std::optional<std::int64_t> timeout_in_millis) {
            live(t.box);
            return t.task.get_results(timeout_in_millis);
          },
          "timeout_in_millis"_a = py::none())
      .def_property_readonly("task_id", [](const TaskHandle& t) { return t.task.id(); })
      .def_property_readonly("done", [](const TaskHandle& t) { return t.task.done(); })
      .def_property_readonly("diagnostics",
                             [](const TaskHandle& t) { return t.task.diagnostics(); });

  py::class_<CacheManagerHandle> manager(m, "CacheManager");
  bind_shared_cache_methods<CacheManagerHandle, CacheView>(manager, "cache", "dst_cache");
  manager
      .def(
          "register_cache",
          [](CacheManagerHandle& h, const CacheDesc& desc, py::object addrs,
             std::vector<CacheKey> keys, std::optional<bool> remote_accessible) {
            return h.get().register_cache(desc, to_addr_list("addrs", addrs), keys,
                                          remote_accessible);
          },
          "cache_desc"_a, "addrs"_a, "cache_keys"_a = py::tuple(),
          "remote_accessible"_a = py::none())
      .def(
          "register_blocks_cache",
          [](CacheManagerHandle& h, const CacheDesc& desc, py::object addrs,
             std::optional<BlocksCacheKey> key, std::optional<bool> remote_accessible) {
            return h.get().register_blocks_cache(desc, to_addr_list("addrs", addrs), key,
                                                 remote_accessible);
          },
          "cache_desc"_a, "addrs"_a, "blocks_cache_key"_a = py::none(),
          "remote_accessible"_a = py::none())
      .def(
          "unregister_cache",
          [](CacheManagerHandle& h, std::int64_t id) { h.get().unregister_cache(id); },
          "cache_id"_a)
      .def(
          "push_cache",
          [](CacheManagerHandle& h, const CacheKeyByIdAndIndex& key, const CacheView& cache,
             std::int64_t src_batch_index, py::object src, py::object dst, std::int64_t size,
             std::int64_t tpl) {
            h.get().push_cache(key, cache, src_batch_index, to_range("src_layer_range", src),
                               to_range("dst_layer_range", dst), size, tpl);
          },
          "dst_cache_key"_a, "src_cache"_a, "src_batch_index"_a = 0,
          "src_layer_range"_a = py::none(), "dst_layer_range"_a = py::none(), "size"_a = -1,
          "tensor_num_per_layer"_a = kTensorsPerLayer)
      .def(
          "push_blocks",
          [](CacheManagerHandle& h, const BlocksCacheKey& key, const CacheView& cache,
             std::vector<std::int64_t> src_blocks, std::vector<std::int64_t> dst_blocks,
             py::object src, py::object dst, std::int64_t tpl) {
            h.get().push_blocks(key, cache, src_blocks, dst_blocks,
                                to_range("src_layer_range", src), to_range("dst_layer_range", dst),
                                tpl);
          },
          "dst_cache_key"_a, "src_cache"_a, "src_blocks"_a = py::tuple(),
          "dst_blocks"_a = py::tuple(), "src_layer_range"_a = py::none(),
          "dst_layer_range"_a = py::none(), "tensor_num_per_layer"_a = kTensorsPerLayer)
      .def(
          "copy_cache",
          [](CacheManagerHandle& h, const CacheView& dst, const CacheView& src,
             std::int64_t dst_batch_index, std::int64_t src_batch_index, std::int64_t offset,
             std::int64_t size, py::object) {
            h.get().copy_cache(dst, src, dst_batch_index, src_batch_index, offset, size);
          },
          "dst"_a, "src"_a, "dst_batch_index"_a = 0, "src_batch_index"_a = 0, "offset"_a = 0,
          "size"_a = -1, "req_id"_a = py::none())
      .def(
          "copy_blocks",
          [](CacheManagerHandle& h, const CacheView& cache,
             std::map<std::int64_t, std::vector<std::int64_t>> info) {
            h.get().copy_blocks(cache, info);
          },
          "cache"_a, "copy_block_info"_a);

  py::class_<KvCacheManagerHandle> kv_manager(m, "KvCacheManager");
  bind_shared_cache_methods<KvCacheManagerHandle, KvCache>(kv_manager, "kv_cache", "kv_cache");
  kv_manager.def(
      "copy_cache",
      [](KvCacheManagerHandle& h, const KvCache& dst, const KvCache& src,
         std::int64_t dst_batch_index, std::int64_t src_batch_index, std::int64_t offset,
         std::int64_t size) {
        h.get().copy_cache(dst, src, dst_batch_index, src_batch_index, offset, size);
      },
      "dst"_a, "src"_a, "dst_batch_index"_a = 0, "src_batch_index"_a = 0, "offset"_a = 0,
      "size"_a = -1);

  py::class_<DataDistHandle>(m, "LLMDataDist")
      .def(py::init([](LLMRole role, py::object cluster_id) {
             return std::make_unique<DataDistHandle>(role, to_u64("cluster_id", cluster_id));
           }),
           "role"_a, "cluster_id"_a)
      .def(
          "init",
          [](py::object self, const std::map<std::string, std::string>& options) {
            auto& d = self.cast<DataDistHandle&>();
            d.get().init(options);
            if (d.initialized()) d.box()->initialized.emplace(&d, self);
          },
          "options"_a)
      .def("finalize",
           [](DataDistHandle& d) {
             d.get().finalize();
             d.box()->initialized.erase(&d);
           })
      .def_property_readonly("cache_manager",
                             [](py::object self) {
                               auto& d = self.cast<DataDistHandle&>();
                               d.get().cache_manager();  // RuntimeError / LLMException first
                               return CacheManagerHandle{self, &d};
                             })
      .def_property_readonly("kv_cache_manager",
                             [](py::object self) {
                               auto& d = self.cast<DataDistHandle&>();
                               d.get().kv_cache_manager();
                               return KvCacheManagerHandle{self, &d};
                             })
      .def(
          "link_clusters",
          [](DataDistHandle& d, const std::vector<LLMClusterInfo>& clusters, std::int64_t timeout) {
            return d.get().link_clusters(clusters, timeout);
          },
          "clusters"_a, "timeout"_a = 3000)
      .def(
          "unlink_clusters",
          [](DataDistHandle& d, const std::vector<LLMClusterInfo>& clusters, std::int64_t timeout,
             bool force) { return d.get().unlink_clusters(clusters, timeout, force); },
          "clusters"_a, "timeout"_a = 3000, "force"_a = false)
      .def(
          "link",
          [](DataDistHandle& d, py::object comm_name, py::object cluster_rank_info,
             py::object rank_table) {
            impl::LLMDataDist& dist = d.get();
            dist.check_comm_domain_api("link");
            const std::string name = to_str("comm_name", comm_name);
            impl::check_comm_name(name);
            const impl::ClusterRankInfo info = to_cluster_rank_info(cluster_rank_info);
            return dist.link(name, info, to_str("rank_table", rank_table));
          },
          "comm_name"_a, "cluster_rank_info"_a, "rank_table"_a)
      .def(
          "unlink",
          [](DataDistHandle& d, py::object comm_id) {
            impl::LLMDataDist& dist = d.get();
            dist.check_comm_domain_api("unlink");
            dist.unlink(to_u64("comm_id", comm_id));
          },
          "comm_id"_a)
      .def(
          "query_register_mem_status",
          [](DataDistHandle& d, py::object comm_id) {
            impl::LLMDataDist& dist = d.get();
            dist.check_comm_domain_api("query_register_mem_status");
            return dist.query_register_mem_status(to_u64("comm_id", comm_id));
          },
          "comm_id"_a)
      .def(
          "switch_role",
          [](DataDistHandle& d, LLMRole role,
             std::optional<std::map<std::string, std::string>> options) {
            d.get().switch_role(role, options.value_or(std::map<std::string, std::string>{}));
          },
          "role"_a, "options"_a = py::none())
      .def_property_readonly("cluster_id", [](DataDistHandle& d) { return d.get().cluster_id(); })
      .def_property_readonly("role", [](DataDistHandle& d) { return d.get().role(); });
}

// The window [at, until) of a device fault in simulated time, checked: the device exists, both
// times convert, and until is not before at.
std::pair<impl::Time, impl::Time> device_window(sim::World& w, int device, double at,
                                                double until) {
  checked_index("device", device, w.platform().device_count());
  const impl::Time from = seconds_to_time(at, "at");
  const impl::Time to = seconds_to_time(until, "until");
  if (to < from) throw impl::ValueError("until", "must not be before `at`");
  return {from, to};
}
void bind_world(py::module_& m) {
  py::class_<impl::Diagnostic>(m, "Diagnostic")
      .def_property_readonly(
          "kind", [](const impl::Diagnostic& d) { return std::string(to_string(d.kind)); })
      .def_readonly("message", &impl::Diagnostic::message)
      .def_readonly("time_ps", &impl::Diagnostic::time)
      .def_readonly("cluster_id", &impl::Diagnostic::cluster_id)
      .def_readonly("peer_cluster_id", &impl::Diagnostic::peer_cluster_id)
      .def_readonly("task_id", &impl::Diagnostic::task_id)
      .def("__repr__", [](const impl::Diagnostic& d) {
        return "Diagnostic(" + std::string(to_string(d.kind)) + ", '" + d.message + "')";
      });

  py::class_<WorldBox, std::shared_ptr<WorldBox>>(m, "World")
      .def(py::init([](std::optional<std::string> preset,
                       std::optional<std::map<std::string, py::object>> overrides,
                       std::optional<std::string> scenario,
                       std::optional<std::vector<std::string>> host_ips,
                       std::optional<std::vector<std::string>> device_ips) {
             if (running_on_job()) {
               throw impl::RuntimeError("kvsim.World", "cannot be made by a simulated job");
             }
             std::vector<model::Override> ov;
             std::string name = preset.value_or("");
             if (scenario) {
               const sim::Scenario s = sim::load_scenario(*scenario);
               if (name.empty()) name = s.preset;
               ov = s.hardware_overrides;
             }
             if (name.empty()) {
               const char* env = std::getenv("KVSIM_PRESET");
               name = env != nullptr && *env != '\0' ? env : "atlas-a2";
             }
             for (const auto& [k, v] : overrides.value_or(std::map<std::string, py::object>{})) {
               ov.emplace_back(k, py::str(v).cast<std::string>());
             }
             sim::AddressPlan plan{host_ips.value_or(std::vector<std::string>{}),
                                   device_ips.value_or(std::vector<std::string>{})};
             try {
               return make_world(name, ov, scenario.value_or(""), plan);
             } catch (const model::ModelError& e) {
               if (e.kind() == model::ErrorKind::kInvalidArgument) {
                 throw impl::ValueError("addresses", e.what());
               }
               throw;
             }
           }),
           "preset"_a = py::none(), "overrides"_a = py::none(), py::kw_only(),
           "scenario"_a = py::none(), "host_ips"_a = py::none(), "device_ips"_a = py::none())
      .def_readonly("preset", &WorldBox::preset)
      .def_property_readonly("scenario",
                             [](const WorldBox& b) -> std::optional<std::string> {
                               if (b.scenario.empty()) return std::nullopt;
                               return b.scenario;
                             })
      .def_readonly("alive", &WorldBox::alive)
      .def_property_readonly(
          "device_count",
          [](std::shared_ptr<WorldBox> b) { return live(b).platform().device_count(); })
      .def(
          "device_ip",
          [](std::shared_ptr<WorldBox> b, int device) {
            sim::World& w = live(b);
            return w.platform().device_ip(
                checked_index("device", device, w.platform().device_count()));
          },
          "device"_a)
      .def(
          "host_ip",
          [](std::shared_ptr<WorldBox> b, int node) {
            sim::World& w = live(b);
            return w.platform().host_ip(checked_index("node", node, w.spec().nodes));
          },
          "node"_a)
      .def(
          "node_of",
          [](std::shared_ptr<WorldBox> b, int device) {
            sim::World& w = live(b);
            return w.platform().node_of(
                checked_index("device", device, w.platform().device_count()));
          },
          "device"_a)
      .def_property_readonly("nodes",
                             [](std::shared_ptr<WorldBox> b) { return live(b).spec().nodes; })
      .def_property_readonly("now_ps",
                             [](std::shared_ptr<WorldBox> b) { return live(b).platform().now(); })
      .def_property_readonly(
          "diagnostics",
          [](std::shared_ptr<WorldBox> b) { return live(b).directory().diagnostics().entries(); })
      .def_property_readonly(
          "job_failures",
          [](std::shared_ptr<WorldBox> b) { return live(b).platform().job_failures(); })
      .def_property_readonly("links",
                             [](std::shared_ptr<WorldBox> b) {
                               std::vector<std::string> names;
                               for (const model::Link& l : live(b).fabric().topology().links()) {
                                 names.push_back(l.name);
                               }
                               return names;
                             })
      .def(
          "schedule_link_event",
          [](std::shared_ptr<WorldBox> b, const std::string& link, double at,
             const std::string& kind, double factor) {
            sim::World& w = live(b);
            model::LinkEvent ev;
            if (kind == "down") {
              ev.kind = model::LinkEvent::Kind::kDown;
            } else if (kind == "up") {
              ev.kind = model::LinkEvent::Kind::kUp;
            } else if (kind == "degrade") {
              ev.kind = model::LinkEvent::Kind::kDegrade;
              if (!(factor > 0 && factor <= 1)) {
                throw impl::ValueError("factor", "must be in (0, 1] for a degraded link");
              }
              ev.factor = factor;
            } else {
              throw impl::ValueError("kind",
                                     "must be 'down', 'up' or 'degrade', not '" + kind + "'");
            }
            const impl::Time when = seconds_to_time(at, "at");
            if (when < w.platform().now()) {
              throw impl::ValueError("at", "must not be before the world's current time");
            }
            const auto& links = w.fabric().topology().links();
            if (std::none_of(links.begin(), links.end(),
                             [&](const model::Link& l) { return l.name == link; })) {
              throw impl::ValueError("link", "no link named '" + link + "' (see World.links)");
            }
            w.fabric().schedule_link_event(link, when, ev);
          },
          "link"_a, "at"_a, "kind"_a, "factor"_a = 1.0,
          "Schedules a link going down, up or degraded (to `factor` of its bandwidth) at "
          "simulated time `at` seconds.")
      .def(
          "schedule_device_oom",
          [](std::shared_ptr<WorldBox> b, int device, double at, double until) {
            sim::World& w = live(b);
            const auto [from, to] = device_window(w, device, at, until);
            w.platform().add_memory_fault(device, from, to);
          },
          "device"_a, "at"_a, "until"_a,
          "Makes every allocation in `device`'s HBM fail as out of memory from simulated time "
          "`at` to `until` seconds (a fault campaign's device_oom).")
      .def(
          "schedule_completion_delay",
          [](std::shared_ptr<WorldBox> b, int device, double at, double until, double delay) {
            sim::World& w = live(b);
            const auto [from, to] = device_window(w, device, at, until);
            const impl::Time late = seconds_to_time(delay, "delay");
            if (late == 0) throw impl::ValueError("delay", "must be more than 0");
            w.platform().add_completion_delay(device, from, to, late);
          },
          "device"_a, "at"_a, "until"_a, "delay"_a,
          "Makes every copy batch `device`'s engines complete from simulated time `at` to "
          "`until` seconds report its outcome `delay` seconds late (a fault campaign's "
          "completion_delay; the bytes land on time).")
      .def(
          "schedule_queue_stall",
          [](std::shared_ptr<WorldBox> b, int device, double at, double until) {
            sim::World& w = live(b);
            const auto [from, to] = device_window(w, device, at, until);
            if (from < w.platform().now()) throw impl::ValueError("at", "is in the past");
            w.platform().add_queue_stall(device, from, to);
          },
          "device"_a, "at"_a, "until"_a,
          "Makes `device`'s copy engines take nothing new from their queues from simulated time "
          "`at` to `until` seconds: copies posted meanwhile wait, then drain (a fault "
          "campaign's queue_stall).")
      .def(
          "inventory",
          [](std::shared_ptr<WorldBox> b) {
            const sim::WorldInventory inv = sim::take_inventory(live(b));
            py::dict engines;
            for (const auto& [cluster, e] : inv.engines) {
              py::dict d;
              d["caches"] = e.caches;
              d["registered_bytes"] = e.registered_bytes;
              d["links"] = e.links;
              d["comm_domains"] = e.comm_domains;
              d["tasks_in_flight"] = e.tasks_in_flight;
              d["pool_bytes_used"] = e.pool_bytes_used;
              engines[py::int_(cluster)] = d;
            }
            py::dict out;
            out["memory_bytes"] = inv.memory_bytes;
            out["engines"] = engines;
            out["live_jobs"] = inv.live_jobs;
            out["blocked_jobs"] = inv.blocked_jobs;
            out["open_batches"] = inv.open_batches;
            return out;
          },
          "What the world holds now: memory in use, engines' caches, links and tasks, jobs.")
      .def("run_until_idle", [](std::shared_ptr<WorldBox> b) {
        sim::World& w = live(b);
        if (w.platform().on_job()) {
          throw impl::RuntimeError("run_until_idle", "must be called by the script");
        }
        w.platform().run_until_idle();
      });

  m.def("current_world", &current_world, "The current world (made from $KVSIM_PRESET if none).");
  m.def("_shutdown", &shutdown_world);
  m.def(
      "now_ps", [] { return platform().now(); }, "Simulated time in picoseconds.");
  m.def(
      "sleep", [](double seconds) { platform().sleep(seconds_to_time(seconds, "seconds")); },
      "seconds"_a, "Let simulated time pass (a job waits; the script runs the simulation).");
  m.def(
      "alloc",
      [](int device, py::object nbytes, impl::Placement placement) {
        sim::SystemcPlatform& p = platform();
        if (device < 0 || device >= p.device_count()) {
          throw impl::ValueError("device", "no device " + std::to_string(device));
        }
        const std::uint64_t n = to_u64("nbytes", nbytes);
        if (n == 0) throw impl::ValueError("nbytes", "must be > 0");
        const auto addr = p.allocate(device, placement, n, 2ull << 20);
        if (!addr) {
          throw impl::LLMException(
              impl::LLMStatusCode::LLM_DEVICE_OUT_OF_MEMORY, "nbytes",
              std::to_string(n) + " bytes do not fit device " + std::to_string(device));
        }
        return *addr;
      },
      "device"_a, "nbytes"_a, "placement"_a = impl::Placement::DEVICE,
      "Allocate simulated memory (2 MiB aligned) on a device or its node's host.");
  m.def(
      "free", [](std::uint64_t addr) { return platform().free(addr); }, "addr"_a);
  m.def(
      "write",
      [](std::uint64_t addr, py::buffer data) {
        Py_buffer view;
        if (PyObject_GetBuffer(data.ptr(), &view, PyBUF_C_CONTIGUOUS) != 0) {
          throw py::error_already_set();
        }
        struct Release {
          Py_buffer* v;
          ~Release() { PyBuffer_Release(v); }
        } release{&view};
        if (view.len > 0) {
          platform().write(addr, static_cast<const std::uint8_t*>(view.buf),
                           static_cast<std::uint64_t>(view.len));
        }
      },
      "addr"_a, "data"_a, "Write bytes (any C-contiguous buffer) at a simulated address.");
  m.def(
      "read",
      [](std::uint64_t addr, std::uint64_t nbytes) {
        platform().check_read(addr, nbytes);  // before the buffer is sized by nbytes
        std::string out(nbytes, '\0');
        if (nbytes > 0) {
          platform().read(addr, reinterpret_cast<std::uint8_t*>(out.data()), nbytes);
        }
        return py::bytes(out);
      },
      "addr"_a, "nbytes"_a, "Read bytes at a simulated address.");

  py::class_<EventHandle, std::shared_ptr<EventHandle>>(m, "Event")
      .def(py::init([] {
        auto box = current_world();
        return std::make_shared<EventHandle>(EventHandle{box, live(box).platform().make_signal()});
      }))
      .def("set",
           [](EventHandle& e) {
             live(e.box);
             e.signal->set();
           })
      .def("record",
           [](EventHandle& e) {
             live(e.box);
             e.signal->set();
           })
      .def("is_set", [](EventHandle& e) { return e.signal->is_set(); })
      .def(
          "wait",
          [](EventHandle& e, std::optional<double> timeout) {
            live(e.box);
            return e.signal->wait_for(optional_timeout(timeout));
          },
          "timeout"_a = py::none());

  py::class_<JobHandle>(m, "Job")
      .def_property_readonly("done", [](const JobHandle& j) { return j.state->done->is_set(); })
      .def_property_readonly("name", [](const JobHandle& j) { return j.state->name; })
      .def_property_readonly("exception",
                             [](const JobHandle& j) -> py::object {
                               if (!j.state->exception) return py::none();
                               return py::reinterpret_borrow<py::object>(j.state->exception->get());
                             })
      .def(
          "join",
          [](JobHandle& j, std::optional<double> timeout) {
            live(j.box);
            return j.state->done->wait_for(optional_timeout(timeout));
          },
          "timeout"_a = py::none());

  m.def(
      "spawn", [](py::function fn, const std::string& name) { return start_job(fn, name); }, "fn"_a,
      "name"_a = "job",
      "Start fn() as a simulated job now; it may block in simulated time (kvsim.sleep, "
      "Event.wait).");
}

// Starts fn() as a job of the caller's process.
JobHandle start_job(py::function fn, const std::string& name) {
  auto box = current_world();
  sim::SystemcPlatform& p = live(box).platform();
  auto state = std::make_shared<JobState>();
  state->done = p.make_signal();
  state->name = name;
  auto ref = std::make_shared<PyRef>(fn);
  auto body = [state, ref] {
    {
      PythonEntry entry;
      PyObject* r = PyObject_CallNoArgs(ref->get());
      if (r == nullptr) {
        py::object value;
        take_python_error("Exception in kvsim job '" + state->name + "':", &value);
        state->exception = std::make_unique<PyRef>(value);
      } else {
        Py_DECREF(r);
      }
    }
    state->done->set();
  };
  p.spawn("py_" + name, std::move(body));
  return JobHandle{box, state};
}

}  // namespace
}  // namespace kvsim::python

PYBIND11_MODULE(_core, m) {
  m.doc() = "kvsim: llm_datadist on a simulated world";
  kvsim::python::bind_enums(m);
  kvsim::python::bind_values(m);
  kvsim::python::bind_engine(m);
  kvsim::python::bind_world(m);
  kvsim::python::bind_results(m);
  kvsim::python::bind_processes(m);
  kvsim::python::bind_launch_server(m);
}
