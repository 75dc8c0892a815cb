"""Other tools' result files: ``vllm bench serve``, GuideLLM and AIPerf results imported as
read-only sessions (``imported``, one reader per format, ``formats`` to tell them apart), and
a session exported in vLLM's result shape (``vllm_result``)."""
