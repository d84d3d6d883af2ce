"""The user objects: thin requests to the compile driver that hold their compiled artifacts
(PointStencil, ComputationStencil, ParLoop and its data); ``stencilkit``'s namespace re-exports them."""
