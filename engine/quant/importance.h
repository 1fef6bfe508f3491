// Importance matrices: per weight matrix, the mean square of each input
// channel's activation over calibration text (per expert for the experts'
// 3-D tensors), which the weighted quantizers use to spend precision where
// the signal is (kernels::quantize_row_weighted). Read from llama.cpp's
// imatrix file (llama-imatrix's output, the legacy binary format that
// llama-quantize --imatrix reads), with its values divided by the call count
// as llama-quantize does.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace strata::quant {

struct ImportanceMatrix {
    // Tensor name -> values: ne[0] per matrix, times the experts of a 3-D tensor.
    std::map<std::string, std::vector<float>> values;
    int chunks = 0;       // calibration chunks it was computed on (0: not recorded)
    std::string dataset;  // the calibration file's name, when recorded
};

// Throws strata::Error naming the file and what is wrong with it.
ImportanceMatrix read_llama_imatrix(const std::string& path);

}  // namespace strata::quant
