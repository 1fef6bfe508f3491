// Value factories and comparison.
#include <cstring>

#include "common/error.h"
#include "gguf/gguf.h"

namespace strata::gguf {
namespace {

Value scalar(ValueType t) {
    Value v;
    v.type = t;
    return v;
}

Value make_unsigned(ValueType t, uint64_t x) {
    Value v = scalar(t);
    v.u = x;
    return v;
}

Value make_signed(ValueType t, int64_t x) {
    Value v = scalar(t);
    v.i = x;
    return v;
}

Value make_float(ValueType t, double x) {
    Value v = scalar(t);
    v.f = x;
    return v;
}

uint64_t double_bits(double d) {
    uint64_t b;
    std::memcpy(&b, &d, sizeof b);
    return b;
}

}  // namespace

Value Value::make_u8(uint8_t v) { return make_unsigned(ValueType::UINT8, v); }
Value Value::make_i8(int8_t v) { return make_signed(ValueType::INT8, v); }
Value Value::make_u16(uint16_t v) { return make_unsigned(ValueType::UINT16, v); }
Value Value::make_i16(int16_t v) { return make_signed(ValueType::INT16, v); }
Value Value::make_u32(uint32_t v) { return make_unsigned(ValueType::UINT32, v); }
Value Value::make_i32(int32_t v) { return make_signed(ValueType::INT32, v); }
Value Value::make_u64(uint64_t v) { return make_unsigned(ValueType::UINT64, v); }
Value Value::make_i64(int64_t v) { return make_signed(ValueType::INT64, v); }
Value Value::make_f32(float v) { return make_float(ValueType::FLOAT32, v); }
Value Value::make_f64(double v) { return make_float(ValueType::FLOAT64, v); }
Value Value::make_bool(bool v) { return make_unsigned(ValueType::BOOL, v ? 1 : 0); }

Value Value::make_string(std::string v) {
    Value out = scalar(ValueType::STRING);
    out.str = std::move(v);
    return out;
}

Value Value::make_array(ValueType elem_type, std::vector<Value> items) {
    if (static_cast<uint32_t>(elem_type) > static_cast<uint32_t>(ValueType::FLOAT64)) {
        throw Error("gguf: array element type " + std::to_string(static_cast<uint32_t>(elem_type)) +
                    " is unknown (expected 0..12)");
    }
    for (size_t k = 0; k < items.size(); ++k) {
        if (items[k].type != elem_type) {
            throw Error("gguf: array element " + std::to_string(k) + " has type " + value_type_name(items[k].type) +
                        ", expected " + value_type_name(elem_type) + " like the array's element type");
        }
    }
    Value out = scalar(ValueType::ARRAY);
    out.elem_type = elem_type;
    out.array = std::move(items);
    return out;
}

Value Value::make_string_array(const std::vector<std::string>& items) {
    Value out = scalar(ValueType::ARRAY);
    out.elem_type = ValueType::STRING;
    out.array.reserve(items.size());
    for (const std::string& s : items) out.array.push_back(make_string(s));
    return out;
}

Value Value::make_f32_array(const std::vector<float>& items) {
    Value out = scalar(ValueType::ARRAY);
    out.elem_type = ValueType::FLOAT32;
    out.array.reserve(items.size());
    for (float x : items) out.array.push_back(make_f32(x));
    return out;
}

Value Value::make_i32_array(const std::vector<int32_t>& items) {
    Value out = scalar(ValueType::ARRAY);
    out.elem_type = ValueType::INT32;
    out.array.reserve(items.size());
    for (int32_t x : items) out.array.push_back(make_i32(x));
    return out;
}

bool Value::operator==(const Value& o) const {
    if (type != o.type) return false;
    switch (type) {
        case ValueType::UINT8: case ValueType::UINT16: case ValueType::UINT32: case ValueType::UINT64:
        case ValueType::BOOL:
            return u == o.u;
        case ValueType::INT8: case ValueType::INT16: case ValueType::INT32: case ValueType::INT64:
            return i == o.i;
        case ValueType::FLOAT32: case ValueType::FLOAT64: return double_bits(f) == double_bits(o.f);
        case ValueType::STRING: return str == o.str;
        case ValueType::ARRAY: return elem_type == o.elem_type && array == o.array;
    }
    return false;
}

}  // namespace strata::gguf
