"""What an answer rests on: which source backs each sentence (``attribution``), and whether the sources
answer the question at all (``answerability``)."""
