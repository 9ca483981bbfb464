"""Real trained models: scikit-learn estimators fit here on synthetic data, converted by
skl2onnx as users convert them (ZipMap probabilities, string class labels, pipelines with
categorical string columns, DictVectorizer), run through `umd serve` (`umd.Graph`, the Python
client's `Model.run`) and compared with onnxruntime on the same model and inputs."""

import numpy as np
import pytest

ort = pytest.importorskip("onnxruntime")
sklearn = pytest.importorskip("sklearn")
skl2onnx = pytest.importorskip("skl2onnx")

from skl2onnx import to_onnx  # noqa: E402
from skl2onnx.common.data_types import (  # noqa: E402
    DictionaryType, FloatTensorType, StringTensorType)
from sklearn import ensemble, linear_model, neighbors, neural_network, svm, tree  # noqa: E402
from sklearn.compose import ColumnTransformer  # noqa: E402
from sklearn.datasets import make_classification, make_regression  # noqa: E402
from sklearn.feature_extraction import DictVectorizer  # noqa: E402
from sklearn.pipeline import make_pipeline  # noqa: E402
from sklearn.preprocessing import OneHotEncoder, StandardScaler  # noqa: E402

NAMES = np.array(["setosa", "versicolor", "virginica", "other"])


def data(n_classes, n=120, seed=0):
    x, y = make_classification(n_samples=n, n_features=6, n_informative=4, n_redundant=0,
                               n_classes=n_classes, random_state=seed)
    return x.astype(np.float32), y


def same(got, want, name, rtol=1e-4, atol=1e-5):
    """One output of umd against onnxruntime's: arrays (numbers or strings), or a list of maps."""
    if isinstance(want, list):
        assert isinstance(got, list) and len(got) == len(want), name
        for g, w in zip(got, want):
            assert set(g) == set(w), name
            for k in w:
                assert g[k] == pytest.approx(w[k], rel=rtol, abs=atol), f"{name}[{k}]"
        return
    want = np.asarray(want)
    assert got.shape == want.shape, name
    if want.dtype.kind in "OSU":
        assert got.astype(str).tolist() == want.astype(str).tolist(), name
    else:
        np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, err_msg=name)


def check(server, onx, feeds, rtol=1e-4, atol=1e-5):
    from umd_client import Client
    sess = ort.InferenceSession(onx.SerializeToString(), providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    want = dict(zip(names, sess.run(None, feeds)))
    with Client(server) as c:
        model = c.load_model(onx.SerializeToString())
        got = model.run(feeds)
        model.unload()
    assert set(got) == set(want)
    for name in names:
        same(got[name], want[name], name, rtol, atol)


CLASSIFIERS = {
    "logistic": lambda: linear_model.LogisticRegression(max_iter=500),
    "forest": lambda: ensemble.RandomForestClassifier(n_estimators=12, max_depth=5,
                                                      random_state=0),
    "boosting": lambda: ensemble.GradientBoostingClassifier(n_estimators=15, max_depth=3,
                                                           random_state=0),
    "tree": lambda: tree.DecisionTreeClassifier(max_depth=6, random_state=0),
    "svc": lambda: svm.SVC(probability=True, random_state=0),
    "mlp": lambda: neural_network.MLPClassifier(hidden_layer_sizes=(16,), max_iter=300,
                                                random_state=0),
    "knn": lambda: neighbors.KNeighborsClassifier(n_neighbors=5),
}


@pytest.mark.filterwarnings("ignore")
@pytest.mark.parametrize("kind", list(CLASSIFIERS))
@pytest.mark.parametrize("n_classes,labels", [(3, "strings"), (2, "ints"), (3, "ints")])
def test_classifier_with_zipmap(server, kind, n_classes, labels):
    x, y = data(n_classes, seed=n_classes)
    if labels == "strings":
        y = NAMES[y]
    est = CLASSIFIERS[kind]().fit(x, y)
    onx = to_onnx(est, x[:1], target_opset={"": 17, "ai.onnx.ml": 3})
    check(server, onx, {"X": x[:40]})


@pytest.mark.filterwarnings("ignore")
@pytest.mark.parametrize("kind", ["linear", "forest", "boosting", "svr", "mlp"])
def test_regressor(server, kind):
    est = {
        "linear": lambda: linear_model.Ridge(alpha=0.5),
        "forest": lambda: ensemble.RandomForestRegressor(n_estimators=10, max_depth=5,
                                                         random_state=0),
        "boosting": lambda: ensemble.GradientBoostingRegressor(n_estimators=20, random_state=0),
        "svr": lambda: svm.SVR(C=2.0),
        "mlp": lambda: neural_network.MLPRegressor(hidden_layer_sizes=(16,), max_iter=300,
                                                   random_state=0),
    }[kind]()
    x, y = make_regression(n_samples=100, n_features=5, noise=0.1, random_state=1)
    x = x.astype(np.float32)
    est.fit(x, y)
    onx = to_onnx(est, x[:1], target_opset={"": 17, "ai.onnx.ml": 3})
    check(server, onx, {"X": x[:30]}, rtol=1e-4, atol=1e-4)


@pytest.mark.filterwarnings("ignore")
def test_pipeline_with_a_categorical_string_column(server):
    """StandardScaler on the numbers, OneHotEncoder on a string column (an unseen category at
    run time), then LogisticRegression with string labels: two inputs of two types."""
    rng = np.random.default_rng(3)
    n = 150
    num = rng.normal(size=(n, 3)).astype(np.float32)
    colour = rng.choice(["red", "green", "blue"], size=(n, 1))
    y = NAMES[(num[:, 0] + (colour[:, 0] == "red") > 0.3).astype(int)]
    pre = ColumnTransformer([("num", StandardScaler(), [0, 1, 2]),
                             ("cat", OneHotEncoder(handle_unknown="ignore"), [3])])
    frame = np.concatenate([num.astype(object), colour.astype(object)], axis=1)
    pipe = make_pipeline(pre, linear_model.LogisticRegression(max_iter=300)).fit(frame, y)
    onx = to_onnx(pipe, initial_types=[("num", FloatTensorType([None, 3])),
                                       ("cat", StringTensorType([None, 1]))],
                  target_opset={"": 17, "ai.onnx.ml": 3})
    colour_test = colour[:20].copy()
    colour_test[3, 0] = "mauve"
    check(server, onx, {"num": num[:20], "cat": colour_test.astype(object)})


@pytest.mark.filterwarnings("ignore")
def test_dict_vectorizer_pipeline(server):
    """A dict of features (one map per call, as skl2onnx types it) through DictVectorizer."""
    rng = np.random.default_rng(4)
    keys = ["a", "b", "c", "d"]
    rows = [{k: float(rng.normal()) for k in keys if rng.uniform() < 0.8} for _ in range(80)]
    y = np.array([r.get("a", 0.0) - r.get("c", 0.0) for r in rows])
    pipe = make_pipeline(DictVectorizer(sparse=False), linear_model.LinearRegression())
    pipe.fit(rows, y)
    onx = to_onnx(pipe, initial_types=[("X", DictionaryType(StringTensorType([]),
                                                             FloatTensorType([])))],
                  target_opset={"": 17, "ai.onnx.ml": 3})
    for r in rows[:5]:
        check(server, onx, {"X": r}, rtol=1e-4, atol=1e-4)


def _more():
    from sklearn import (calibration, cluster, cross_decomposition, decomposition,
                         discriminant_analysis, feature_selection, impute, mixture, multiclass,
                         naive_bayes, preprocessing, random_projection)
    return {
        # classifiers (string labels)
        "LinearSVC": lambda: svm.LinearSVC(),
        "SGDClassifier": lambda: linear_model.SGDClassifier(random_state=0),
        "GaussianNB": lambda: naive_bayes.GaussianNB(),
        "MultinomialNB": lambda: naive_bayes.MultinomialNB(),
        "BernoulliNB": lambda: naive_bayes.BernoulliNB(),
        "LDA": lambda: discriminant_analysis.LinearDiscriminantAnalysis(),
        "RidgeClassifier": lambda: linear_model.RidgeClassifier(),
        "Perceptron": lambda: linear_model.Perceptron(random_state=0),
        "ExtraTrees": lambda: ensemble.ExtraTreesClassifier(n_estimators=5, random_state=0),
        "AdaBoost": lambda: ensemble.AdaBoostClassifier(n_estimators=5, random_state=0),
        "Bagging": lambda: ensemble.BaggingClassifier(n_estimators=3, random_state=0),
        "SoftVoting": lambda: ensemble.VotingClassifier(
            [("a", linear_model.LogisticRegression()), ("b", naive_bayes.GaussianNB())],
            voting="soft", flatten_transform=False),
        "Stacking": lambda: ensemble.StackingClassifier(
            [("a", linear_model.LogisticRegression()), ("b", naive_bayes.GaussianNB())]),
        "OneVsRest": lambda: multiclass.OneVsRestClassifier(linear_model.LogisticRegression()),
        "Calibrated": lambda: calibration.CalibratedClassifierCV(svm.LinearSVC(), cv=3),
        "ScalePCALogistic": lambda: make_pipeline(StandardScaler(), decomposition.PCA(3),
                                                  linear_model.LogisticRegression()),
        # transformers and unsupervised models (no labels)
        "KMeans": lambda: cluster.KMeans(n_clusters=3, n_init=2, random_state=0),
        "PCA": lambda: decomposition.PCA(n_components=3),
        "TruncatedSVD": lambda: decomposition.TruncatedSVD(n_components=3, random_state=0),
        "MinMaxScaler": lambda: preprocessing.MinMaxScaler(),
        "RobustScaler": lambda: preprocessing.RobustScaler(),
        "PolynomialFeatures": lambda: preprocessing.PolynomialFeatures(2),
        "Binarizer": lambda: preprocessing.Binarizer(),
        "Normalizer": lambda: preprocessing.Normalizer(),
        "KBinsDiscretizer": lambda: preprocessing.KBinsDiscretizer(n_bins=3, encode="ordinal"),
        "SimpleImputer": lambda: impute.SimpleImputer(),
        "IsolationForest": lambda: ensemble.IsolationForest(n_estimators=5, random_state=0),
        "GaussianMixture": lambda: mixture.GaussianMixture(n_components=2, random_state=0),
        "RandomProjection": lambda: random_projection.GaussianRandomProjection(
            n_components=3, random_state=0),
        "SelectKBest": lambda: feature_selection.SelectKBest(k=3),
        # regressors
        "KNNRegressor": lambda: neighbors.KNeighborsRegressor(),
        "Lasso": lambda: linear_model.Lasso(alpha=0.1),
        "ElasticNet": lambda: linear_model.ElasticNet(),
        "ExtraTreesRegressor": lambda: ensemble.ExtraTreesRegressor(n_estimators=5,
                                                                    random_state=0),
        "AdaBoostRegressor": lambda: ensemble.AdaBoostRegressor(n_estimators=5, random_state=0),
        "LinearSVR": lambda: svm.LinearSVR(),
        "PLSRegression": lambda: cross_decomposition.PLSRegression(n_components=2),
    }


UNSUPERVISED = {"KMeans", "PCA", "TruncatedSVD", "MinMaxScaler", "RobustScaler",
                "PolynomialFeatures", "Binarizer", "Normalizer", "KBinsDiscretizer",
                "SimpleImputer", "IsolationForest", "GaussianMixture", "RandomProjection"}
REGRESSORS = {"KNNRegressor", "Lasso", "ElasticNet", "ExtraTreesRegressor", "AdaBoostRegressor",
              "LinearSVR", "PLSRegression"}


@pytest.mark.filterwarnings("ignore")
@pytest.mark.parametrize("name", list(_more()))
def test_more_estimators(server, name):
    """Further estimators as users convert them: every classifier with string labels, the
    transformers and unsupervised models, regressors."""
    est = _more()[name]()
    if name in REGRESSORS:
        x, y = make_regression(n_samples=100, n_features=6, random_state=1)
        x = x.astype(np.float32)
    else:
        x, y = data(3)
        y = NAMES[y]
    if name == "MultinomialNB":
        x = np.abs(x)
    if name in UNSUPERVISED:
        est.fit(x)
    else:
        est.fit(x, y)
    onx = to_onnx(est, x[:1], target_opset={"": 17, "ai.onnx.ml": 3})
    check(server, onx, {"X": x[:30]}, rtol=1e-4, atol=1e-4)


DOCS = np.array(["the cat sat on the mat", "dogs and cats living together", "a mat for the dog",
                 "cats sat quietly", "the end of the story", "Dog eat dog", "THE CAT, the hat",
                 "story time for cats and dogs"] * 4)


@pytest.mark.filterwarnings("ignore")
@pytest.mark.parametrize("vectorizer,model", [
    ("tfidf", "logistic"), ("tfidf-bigrams", "logistic"), ("count", "naive-bayes")])
def test_text_pipeline(server, vectorizer, model):
    """Text classification as users build it: CountVectorizer/TfidfVectorizer (skl2onnx writes
    StringNormalizer, com.microsoft Tokenizer and TfIdfVectorizer over string tokens), then a
    classifier. Checked against scikit-learn itself: onnxruntime's StringNormalizer needs the
    en_US.UTF-8 locale, which a bare machine lacks."""
    from sklearn import feature_extraction, naive_bayes
    from umd_client import Client
    vec = {"tfidf": lambda: feature_extraction.text.TfidfVectorizer(),
           "tfidf-bigrams": lambda: feature_extraction.text.TfidfVectorizer(ngram_range=(1, 2)),
           "count": lambda: feature_extraction.text.CountVectorizer()}[vectorizer]()
    clf = {"logistic": lambda: linear_model.LogisticRegression(max_iter=300),
           "naive-bayes": lambda: naive_bayes.MultinomialNB()}[model]()
    y = NAMES[np.arange(len(DOCS)) % 3]
    pipe = make_pipeline(vec, clf).fit(DOCS, y)
    onx = to_onnx(pipe, initial_types=[("text", StringTensorType([None]))],
                  options={id(pipe): {"zipmap": False}})
    test = np.array(list(DOCS[:6]) + ["an unseen sentence", ""], dtype=object)
    with Client(server) as c:
        m = c.load_model(onx.SerializeToString())
        got = m.run({"text": test})
        m.unload()
    assert got["label"].astype(str).tolist() == pipe.predict(test).tolist()
    np.testing.assert_allclose(got["probabilities"], pipe.predict_proba(test), rtol=1e-4,
                               atol=1e-5)


@pytest.mark.filterwarnings("ignore")
def test_a_forest_of_realistic_size(server):
    """100 trees of depth 10 (~1.7 MB of attributes, more than one request's constant-value
    budget: attributes have their own, 64 MiB; the table reaches the kernel in hundreds of chunks)."""
    x, y = data(3, n=2000)
    est = ensemble.RandomForestClassifier(n_estimators=100, max_depth=10,
                                          random_state=0).fit(x, NAMES[y])
    onx = to_onnx(est, x[:1], target_opset={"": 17, "ai.onnx.ml": 3})
    assert onx.ByteSize() > 1 << 20
    check(server, onx, {"X": x[:50]})
