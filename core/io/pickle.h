#pragma once
// A safe unpickler for the data.pkl of PyTorch checkpoints (torch.save). It builds an inert
// graph of values and never imports, calls or constructs anything a pickle names: GLOBAL only
// records a (module, name) pair, and REDUCE/NEWOBJ are interpreted as data for the handful of
// callables npw understands (collections.OrderedDict, torch._utils._rebuild_tensor[_v2],
// torch._utils._rebuild_parameter, torch.Size, builtins.set/frozenset, _codecs.encode); any
// other call or instantiation becomes an inert Object placeholder that is never called.
// Opcodes: the weights-only set of shared/notes/formats.md plus what protocols 2-4 need for
// state dicts and argparse.Namespace (MEMOIZE, FRAME, STACK_GLOBAL, SHORT_BINUNICODE,
// BINUNICODE8, (SHORT_)BINBYTES(8), EMPTY_SET/ADDITEMS); every other opcode is an npw::Error
// naming it and its offset. Limits bound what a hostile pickle can make npw allocate.
// The value types are in core/io/pickle_value.h, the interpreter in core/io/pickle_unpickler.h.
// No torch and no Qt here.
#include <cstddef>
#include <deque>
#include <memory>
#include <string>
#include <string_view>

#include "core/io/pickle_value.h"

namespace npw {

struct PickleLimits {
    size_t maxDepth = 256;  // open MARKs at once, and tuples nested in tuples
    size_t maxMemoEntries = 1 << 20;
    size_t maxStringBytes = 64u << 20;  // one string or bytes value
    size_t maxObjects = 1 << 21;        // values created in all (each costs ~200 bytes)
    size_t maxDerivedBytes = 256u << 20;  // bytes made by _codecs.encode in all (a memoized string can be encoded many times)
};

// The values of one pickle; the graph lives as long as the document.
class PickleDocument {
public:
    const PickleValue& root() const { return *root_; }
    size_t objectCount() const { return values_.size(); }
    int protocol() const { return protocol_; }

private:
    friend class Unpickler;
    std::deque<PickleValue> values_;  // a deque: values never move, so pointers to them stay valid
    const PickleValue* root_ = nullptr;
    int protocol_ = 0;
};

// Parses a whole pickle: it must end with STOP at its last byte. `source` names it in errors
// ("model.pt: model/data.pkl"). Throws npw::Error naming the source, the opcode and its offset.
std::shared_ptr<const PickleDocument> unpickle(std::string_view bytes, const std::string& source,
                                               const PickleLimits& limits = {});

}  // namespace npw
