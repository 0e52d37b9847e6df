// Visualisation of masks: colour overlays and plain mask images, for the CLI and debugging.
#pragma once
#include <array>
#include <cstdint>
#include <vector>

#include "vitrt/image.h"

namespace vitrt {

// Colour of mask `index` in overlays: hues spread by the golden ratio so neighbours differ,
// the same for every run.
std::array<uint8_t, 3> mask_color(int index);

// Blends each mask (row-major h x w, nonzero = inside, h and w those of `rgb`) over the RGB
// image in its own colour with weight alpha, later masks on top, and outlines it with a
// 1-pixel opaque contour in a darker shade.
Image overlay_masks(const Image& rgb, const std::vector<const uint8_t*>& masks,
                    float alpha = 0.5f);

// A 1-channel image: 255 inside the mask, 0 outside.
Image mask_to_image(const uint8_t* mask, int w, int h);

}  // namespace vitrt
