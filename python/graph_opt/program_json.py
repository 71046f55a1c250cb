"""An fx graph as the torch.export program JSON graph-opt's importer reads, written
straight from the fx nodes (graph_opt.from_fx's fast path; issue 53, item 5).

torch's own serializer (torch._export.serde.serialize.GraphModuleSerializer) builds a
dataclass per argument, size and stride (each union through SymInt.create, which calls
dataclasses.fields twice), formats the whole graph as Python code for a debug log that is
off, and then turns the dataclasses back into dicts: 1.6 s of the 1.9 s GPT-2's joint graph
(2,360 nodes) took to reach the IR without the type check (one run). This writer makes the same JSON from plain dicts for
the graphs torch.compile and torch.export hand graph-opt: static shapes, OpOverload calls
(multi-output ones through their getitem users), tensors, scalars, lists, dtypes, devices,
layouts and memory formats as arguments. Anything else (symbolic sizes, higher-order
operators, custom objects, operators as arguments...) raises Unsupported, and from_fx then
takes torch's serializer for the whole graph. Node metadata: what the importer reads
(stack_trace, nn_module_stack, custom), not source_fn_stack, torch_fn or from_node.
python/tests/test_fx_pt2.py checks that both give the same JSON on the graphs tested.
"""
import json
import math
import operator

import torch
from torch._export.serde import schema as _schema
from torch._export.serde import serialize as _serde


class Unsupported(Exception):
    """Something this writer does not write (the message says what): torch's serializer
    writes the graph instead."""


_POSITIONAL = _schema.ArgumentKind.POSITIONAL.value
_KEYWORD = _schema.ArgumentKind.KEYWORD.value


def _float(x):
    """A float as torch's serializer writes one (infinities and NaN as strings)."""
    if x == math.inf:
        return "Infinity"
    if x == -math.inf:
        return "-Infinity"
    if math.isnan(x):
        return "NaN"
    return x


class _Writer:
    def __init__(self, gm):
        self.gm = gm
        self.tensor_values = {}
        self.metas = {}  # one dict per distinct layout, shared by its tensors
        self.duplicate_getitems = {}  # a getitem of an index read before: its first reader

    # -- values ------------------------------------------------------------------------

    def tensor_meta(self, t):
        sizes, strides, offset = tuple(t.shape), t.stride(), t.storage_offset()
        if not all(type(s) is int for s in (*sizes, *strides, offset)):
            raise Unsupported("a tensor with symbolic sizes")
        key = (t.dtype, sizes, strides, offset, t.device, t.requires_grad, t.layout)
        meta = self.metas.get(key)
        if meta is None:
            meta = self.metas[key] = {
                "dtype": _serde._TORCH_TO_SERIALIZE_DTYPE[t.dtype].value,
                "sizes": [{"as_int": s} for s in sizes],
                "requires_grad": t.requires_grad,
                "device": {"type": t.device.type, "index": t.device.index},
                "strides": [{"as_int": s} for s in strides],
                "storage_offset": {"as_int": offset},
                "layout": _serde._TORCH_TO_SERIALIZE_LAYOUT[t.layout].value,
            }
        return meta

    def tensor_output(self, name, value):
        if not isinstance(value, torch.Tensor):
            raise Unsupported(f"a result '{name}' that is a {type(value).__name__}")
        if name in self.tensor_values:
            raise Unsupported(f"the value name '{name}' made twice")
        self.tensor_values[name] = self.tensor_meta(value)
        return {"name": name}

    def output(self, name, value):
        if value is None:
            return {"as_none": True}
        return {"as_tensor": self.tensor_output(name, value)}

    # -- arguments -----------------------------------------------------------------------

    def tensor_name(self, node):
        if node.op == "get_attr":
            raise Unsupported(f"a get_attr argument '{node.target}'")
        val = node.meta.get("val")
        if not isinstance(val, torch.Tensor):
            raise Unsupported(f"an argument '{node.name}' that is not a tensor")
        return {"name": self.duplicate_getitems.get(node.name, node.name)}

    def argument(self, arg, arg_type=None):
        if isinstance(arg, torch.fx.Node):
            return {"as_tensor": self.tensor_name(arg)}
        kind = type(arg)
        if kind is bool:
            return {"as_bool": arg}
        if kind is str:
            return {"as_string": arg}
        if kind is int:
            return {"as_int": arg}
        if kind is float:
            return {"as_float": _float(arg)}
        if arg is None:
            return {"as_none": True}
        if isinstance(arg, (list, tuple)):
            return self.list_argument(arg, arg_type)
        if isinstance(arg, torch.dtype):
            return {"as_scalar_type": _serde._TORCH_TO_SERIALIZE_DTYPE[arg].value}
        if isinstance(arg, torch.device):
            return {"as_device": {"type": arg.type, "index": arg.index}}
        if isinstance(arg, torch.memory_format):
            return {"as_memory_format": _serde._TORCH_TO_SERIALIZE_MEMORY_FORMAT[arg].value}
        if isinstance(arg, torch.layout):
            return {"as_layout": _serde._TORCH_TO_SERIALIZE_LAYOUT[arg].value}
        raise Unsupported(f"an argument of type {type(arg).__name__}")

    def list_argument(self, arg, arg_type):
        if not arg:
            if arg_type is None:
                raise Unsupported("an empty list of unknown type")
            if isinstance(arg_type, torch.OptionalType):
                arg_type = arg_type.getElementType()
            if not isinstance(arg_type, torch.ListType):
                raise Unsupported(f"an empty list for a {arg_type}")
            elem = arg_type.getElementType()
            if isinstance(elem, torch.OptionalType):
                elem = elem.getElementType()
            for ty, key in ((torch.BoolType, "as_bools"), (torch.IntType, "as_ints"),
                            (torch.FloatType, "as_floats"), (torch.StringType, "as_strings"),
                            (torch.TensorType, "as_tensors")):
                if isinstance(elem, ty):
                    return {key: []}
            raise Unsupported(f"an empty list of {elem}")
        kinds = {type(a) for a in arg}
        if kinds == {bool}:
            return {"as_bools": list(arg)}
        if kinds == {int}:
            return {"as_ints": list(arg)}
        if kinds == {float}:
            return {"as_floats": [_float(a) for a in arg]}
        if kinds == {str}:
            return {"as_strings": list(arg)}
        if kinds == {torch.fx.Node}:
            return {"as_tensors": [self.tensor_name(a) for a in arg]}
        if kinds <= {torch.fx.Node, type(None)}:
            return {"as_optional_tensors": [
                {"as_none": True} if a is None else {"as_tensor": self.tensor_name(a)}
                for a in arg]}
        raise Unsupported(f"a list of {sorted(k.__name__ for k in kinds)}")

    def inputs(self, node):
        schema = node.target._schema
        named = []
        for i, schema_arg in enumerate(schema.arguments):
            if schema_arg.name in node.kwargs:
                value, kind = node.kwargs[schema_arg.name], _KEYWORD
            elif not schema_arg.kwarg_only and i < len(node.args):
                value, kind = node.args[i], _POSITIONAL
            else:
                continue  # left to its default, as torch's serializer leaves it
            named.append({"name": schema_arg.name, "arg": self.argument(value, schema_arg.type),
                          "kind": kind})
        return named

    # -- results -------------------------------------------------------------------------

    def user_at(self, node, index):
        """The getitem reading result `index` of `node` (the first, where several do: the
        others become duplicates of it)."""
        found = None
        for user in node.users:
            if user.target is not operator.getitem:
                raise Unsupported(f"'{user.name}' reads the results of '{node.name}' "
                                  f"other than by index")
            if user.args[1] == index:
                if found is None:
                    found = user
                else:
                    self.duplicate_getitems[user.name] = found.name
        return found

    def name_at(self, node, index):
        user = self.user_at(node, index)
        return user.name if user is not None else f"{node.name}_unused_{index}"

    def outputs(self, node):
        returns = node.target._schema.returns
        if not returns:
            return []
        val = node.meta["val"]
        if len(returns) == 1:
            ty = returns[0].real_type
            if isinstance(ty, torch.ListType) and isinstance(ty.getElementType(),
                                                             torch.TensorType):
                return [{"as_tensors": [self.tensor_output(self.name_at(node, i), m)
                                        for i, m in enumerate(val)]}]
            return [self.output(node.name, val)]
        results = []
        for i, (meta, ret) in enumerate(zip(val, returns)):
            if meta is None:
                results.append({"as_none": True})
            elif isinstance(meta, torch.Tensor):
                results.append(self.output(self.name_at(node, i), meta))
            else:
                raise Unsupported(f"result {i} of '{node.name}' is a {type(meta).__name__}")
        return results

    # -- nodes ---------------------------------------------------------------------------

    @staticmethod
    def metadata(node):
        """The metadata graph-opt's importer reads, as torch's serializer writes it."""
        meta, out = node.meta, {}
        if meta.get("stack_trace"):
            out["stack_trace"] = meta["stack_trace"]
        if meta.get("nn_module_stack"):
            entries = []
            for key, value in meta["nn_module_stack"].items():
                if not (isinstance(value, tuple) and len(value) == 2
                        and all(isinstance(v, str) for v in value)):
                    raise Unsupported(f"the module stack of '{node.name}'")
                entries.append(f"{key},{value[0]},{value[1]}")
            out["nn_module_stack"] = _serde.ST_DELIMITER.join(entries)
        if meta.get("custom"):
            try:
                out["custom"] = json.dumps(meta["custom"])
            except (TypeError, ValueError) as e:  # torch's serializer says which node
                raise Unsupported(f"the custom metadata of '{node.name}': {e}") from e
        return out

    def call(self, node):
        target = node.target
        if target is operator.getitem:
            return None  # its producer names it
        if not isinstance(target, torch._ops.OpOverload):
            raise Unsupported(f"'{node.name}' calls {target}, not an operator overload")
        val = node.meta.get("val")
        if isinstance(val, (torch.SymInt, torch.SymBool, torch.SymFloat)):
            raise Unsupported(f"'{node.name}' makes a symbolic value")
        return {"name": node.name,
                "target": f"{target.__module__.replace('torch._ops', 'torch.ops')}."
                          f"{target.__name__}",
                "inputs": self.inputs(node), "outputs": self.outputs(node),
                "metadata": self.metadata(node), "is_hop_single_tensor_return": None}

    def graph(self):
        inputs, nodes, outputs, single = [], [], [], False
        for node in self.gm.graph.nodes:
            if node.op == "placeholder":
                inputs.append({"as_tensor": self.tensor_output(node.name,
                                                               node.meta.get("val"))})
            elif node.op == "call_function":
                written = self.call(node)
                if written is not None:
                    nodes.append(written)
            elif node.op == "output":
                result = node.args[0]
                if isinstance(result, torch.fx.Node):
                    single, outputs = True, [self.argument(result)]
                else:
                    outputs = [self.argument(a) for a in result]
            else:
                raise Unsupported(f"'{node.name}' is a {node.op} node")
        return {"inputs": inputs, "outputs": outputs, "nodes": nodes,
                "tensor_values": self.tensor_values, "sym_int_values": {},
                "sym_bool_values": {}, "is_single_tensor_return": single,
                "custom_obj_values": {}, "sym_float_values": {}}


def exported_program(graph_module, verifiers):
    """torch.export's program around a serialized graph module, as graph-opt's importer
    reads it (no range constraints: static shapes)."""
    return _schema.ExportedProgram(
        graph_module=graph_module,
        opset_version={"aten": torch._C._get_max_operator_version()},
        range_constraints={},
        schema_version=_schema.SchemaVersion(major=_serde.SCHEMA_VERSION[0],
                                             minor=_serde.SCHEMA_VERSION[1]),
        verifiers=verifiers,
        torch_version=torch.__version__,
        guards_code=[],
    )


def program_json(gm, signature, module_call_graph, verifiers):
    """The torch.export program JSON of `gm` (its signature and module call graph as
    torch's serializer writes them: small, and the same). Raises Unsupported for what this
    writer leaves to torch's serializer."""
    graph = _Writer(gm).graph()
    serializer = _serde.GraphModuleSerializer(signature, module_call_graph)
    rest = _schema.GraphModule(
        graph=_schema.Graph(inputs=[], outputs=[], nodes=[], tensor_values={},
                            sym_int_values={}, sym_bool_values={},
                            is_single_tensor_return=False),
        signature=serializer.serialize_signature(signature),
        module_call_graph=serializer.serialize_module_call_graph(module_call_graph),
        metadata=serializer.serialize_graph_module_metadata(gm.meta),
        treespec_namedtuple_fields={})
    as_dict = _serde._dataclass_to_dict(exported_program(rest, verifiers))
    as_dict["graph_module"]["graph"] = graph
    return json.dumps(as_dict, cls=_serde.EnumEncoder, allow_nan=False)
